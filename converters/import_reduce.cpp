// ONNX reductions with no registry op of their own (ReduceL1,
// ReduceSumSquare, ReduceLogSum), through the reduction import of
// src/ops/reduce.cpp.
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/reduce.h>

namespace onyx {

// ---- ONNX reductions without an op of their own

namespace {
Expr reduceL1(Expr x, const std::vector<int>& axes, bool keepdims) { return sum(abs(x), axes, keepdims); }
Expr reduceSumSquare(Expr x, const std::vector<int>& axes, bool keepdims) { return sum(x * x, axes, keepdims); }
Expr reduceLogSum(Expr x, const std::vector<int>& axes, bool keepdims) { return log(sum(x, axes, keepdims)); }
Expr square(Expr x) { return x * x; }
}  // namespace

// sum(|x|)
ONYX_ONNX_IMPORT(kReduceL1Attr, "ReduceL1", 1).untilOpset(17).importer(reduceImport(false, reduceL1));

ONYX_ONNX_IMPORT(kReduceL1Input, "ReduceL1", 18).importer(reduceImport(true, reduceL1, [](Expr x) { return abs(x); }));

// sum(x^2)
ONYX_ONNX_IMPORT(kReduceSumSquareAttr, "ReduceSumSquare", 1).untilOpset(17).importer(reduceImport(false, reduceSumSquare));

ONYX_ONNX_IMPORT(kReduceSumSquareInput, "ReduceSumSquare", 18).importer(reduceImport(true, reduceSumSquare, square));

// log(sum(x))
ONYX_ONNX_IMPORT(kReduceLogSumAttr, "ReduceLogSum", 1).untilOpset(17).importer(reduceImport(false, reduceLogSum));

ONYX_ONNX_IMPORT(kReduceLogSumInput, "ReduceLogSum", 18)
    .importer(reduceImport(true, reduceLogSum, [](Expr x) { return log(x); }));

}  // namespace onyx
