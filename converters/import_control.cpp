// Control flow and sequence/optional values in ONNX import. None of these is
// a registry op: the dynamic graph runs them while it is built (If evaluates
// its condition and imports the branch taken; Loop and Scan unroll their
// body), so gradients flow through whatever was built.
#include <algorithm>

#include <onyx/core/allocation_limit.h>
#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>

namespace onyx {
namespace {

Expr int64Scalar(OnnxImportCtx& c, int64_t v) {
  return c.constant(TensorBase::fromVector<int64_t>(Shape(), std::vector<int64_t>{v}));
}
Expr boolScalar(OnnxImportCtx& c, bool v) {
  Tensor t = TensorBase::create(Shape(), Type::boolean);
  t->set(v ? 1.0 : 0.0);
  return c.constant(t);
}

std::vector<int64_t> dimsOf(const Expr& e) { return e->shape().vec(); }

// x with a new axis of size 1 inserted at `axis`.
Expr unsqueezeAt(OnnxImportCtx& c, Expr x, int64_t axis) {
  auto d = dimsOf(x);
  d.insert(d.begin() + axis, 1);
  return c.make("reshape", {x}, {{"shape", attr(d)}});
}

// x[.., i, ..] along `axis`, the axis removed.
Expr takeAt(OnnxImportCtx& c, Expr x, int64_t axis, int64_t i) {
  Expr s = c.make("slice", {x}, {{"starts", attr(std::vector<int64_t>{i})}, {"ends", attr(std::vector<int64_t>{i + 1})},
                                 {"axes", attr(std::vector<int64_t>{axis})}});
  auto d = dimsOf(s);
  d.erase(d.begin() + axis);
  return c.make("reshape", {s}, {{"shape", attr(d)}});
}

// Pieces stacked along a new axis.
Expr stack(OnnxImportCtx& c, const std::vector<Expr>& xs, int64_t axis) {
  std::vector<Expr> u;
  for(const Expr& x : xs) u.push_back(unsqueezeAt(c, x, axis));
  if(u.size() == 1) return u[0];
  return c.make("concat", u, {{"axis", int64_t(axis)}});
}

Expr emptyOf(OnnxImportCtx& c, Type t, std::vector<int64_t> dims) {
  return c.constant(TensorBase::create(Shape(dims), t == Type::undefined ? Type::float32 : t));
}

bool truth(OnnxImportCtx& c, Expr e, const char* what) {
  Tensor t = c.valueOf(e);
  c.check(t->size() == 1, what, " must hold one value, got shape ", t->shape());
  return t->getAsDouble(0) != 0;
}

// Unrolling adds a body per iteration: the nodes one Loop or Scan may add are
// bounded, so that a trip count or a long scan axis cannot exhaust memory
// (M = 1e6 over a small body built 3.5 GB before this check).
constexpr size_t kMaxUnrolledNodes = size_t(1) << 20;
void checkUnrolled(OnnxImportCtx& c, size_t before, int64_t iterations) {
  size_t now = c.graph().size();
  c.check(now < before || now - before <= kMaxUnrolledNodes, "unrolling ", iterations, " iterations built more than ",
          kMaxUnrolledNodes, " nodes (the limit for one Loop or Scan)");
}

// ---- If

ONYX_ONNX_IMPORT(kIf, "If", 1).importer([](OnnxImportCtx& c) {
  bool cond = c.scalar(0) != 0;
  const char* taken = cond ? "then_branch" : "else_branch";
  c.ignoreAttr(cond ? "else_branch" : "then_branch");
  std::vector<OnnxValue> out = c.subgraph(taken, {});
  c.check(out.size() == c.numOutputs(), taken, " yields ", out.size(), " values, the node has ", c.numOutputs(),
          " outputs");
  for(size_t i = 0; i < out.size(); ++i) c.setOutputValue(i, out[i]);
});

// ---- Loop: unrolled while it is built.

ONYX_ONNX_IMPORT(kLoop, "Loop", 1).importer([](OnnxImportCtx& c) {
  // M read exactly (ints()): through double, INT64_MAX became INT64_MIN,
  // and the loop ran no iteration.
  int64_t maxTrips = INT64_MAX;
  if(c.hasInput(0)) {
    std::vector<int64_t> m = c.ints(0);
    c.check(m.size() == 1, "M (input 0) must hold one value, got ", m.size());
    maxTrips = m[0];
  }
  bool cond = c.hasInput(1) ? c.scalar(1) != 0 : true;
  size_t nCarried = c.numInputs() - 2;
  std::vector<OnnxValue> carried;
  for(size_t i = 0; i < nCarried; ++i) carried.push_back(c.inputValue(2 + i));
  size_t bodyOuts = c.subgraphNumOutputs("body");
  c.check(bodyOuts >= 1 + nCarried, "the body yields ", bodyOuts, " values, fewer than 1 + ", nCarried, " carried");
  size_t nScan = bodyOuts - 1 - nCarried;
  std::vector<std::vector<OnnxValue>> scans(nScan);
  const int64_t kLimit = loopIterationLimit();
  const size_t before = c.graph().size();
  const size_t kMaxCarriedElements = size_t(1) << 24;
  size_t carriedElems = 0;
  for(int64_t i = 0; i < maxTrips && cond; ++i) {
    c.check(i < kLimit, "more than ", kLimit,
            " iterations (the limit: SessionOptions::maxLoopIterations, --max-loop-iterations)");
    checkUnrolled(c, before, i);
    std::vector<OnnxValue> in{OnnxValue::of(int64Scalar(c, i)), OnnxValue::of(boolScalar(c, cond))};
    in.insert(in.end(), carried.begin(), carried.end());
    std::vector<OnnxValue> out = c.subgraph("body", in);
    c.check(out[0].kind == OnnxValue::Kind::Tensor, "the body's condition must be a tensor");
    cond = truth(c, out[0].tensor, "the body's condition");
    for(size_t k = 0; k < nCarried; ++k) {
      carried[k] = out[1 + k];
      // Each iteration copies its carried sequences: bounded, so that a
      // sequence grown by every iteration cannot take quadratic time.
      carriedElems += carried[k].sequence.size();
    }
    c.check(carriedElems <= kMaxCarriedElements, "after ", i + 1, " iterations the loop has carried more than ",
            kMaxCarriedElements, " sequence elements (the limit for one Loop)");
    for(size_t k = 0; k < nScan; ++k) scans[k].push_back(out[1 + nCarried + k]);
  }
  for(size_t k = 0; k < nCarried; ++k) c.setOutputValue(k, carried[k]);
  for(size_t k = 0; k < nScan; ++k) {
    if(!c.wantsOutput(nCarried + k)) continue;
    std::vector<Expr> parts;
    bool seq = false;
    for(const auto& v : scans[k]) {
      if(v.kind == OnnxValue::Kind::Sequence) seq = true;
      parts.push_back(v.tensor);
    }
    c.check(!seq, "scan outputs of sequences are not supported");
    if(parts.empty()) c.setOutput(nCarried + k, emptyOf(c, c.declaredOutputType(nCarried + k), {0}));
    else c.setOutput(nCarried + k, stack(c, parts, 0));
  }
});

// ---- Scan: unrolled along the scan axis.

void scanCore(OnnxImportCtx& c, std::vector<Expr> states, const std::vector<Expr>& xs, std::vector<Expr>* finalStates,
              std::vector<Expr>* scanOuts, const std::vector<int64_t>& inAxes, const std::vector<int64_t>& inDirs,
              const std::vector<int64_t>& outAxes, const std::vector<int64_t>& outDirs, size_t nScanOut) {
  c.check(!xs.empty(), "Scan needs at least one scan input");
  int64_t T = -1;
  std::vector<int64_t> axes;
  for(size_t j = 0; j < xs.size(); ++j) {
    int64_t r = xs[j]->shape().rank();
    int64_t a = c.axis(j < inAxes.size() ? inAxes[j] : 0, static_cast<int>(r), "scan_input_axes");
    axes.push_back(a);
    int64_t len = xs[j]->shape().dims()[a];
    c.check(T < 0 || len == T, "scan inputs have different lengths ", T, " and ", len);
    T = len;
  }
  c.check(T <= loopIterationLimit(), "the scan axis has ", T, " steps, more than ", loopIterationLimit(),
          " (the limit: SessionOptions::maxLoopIterations, --max-loop-iterations)");
  std::vector<std::vector<Expr>> outs(nScanOut);
  const size_t before = c.graph().size();
  for(int64_t t = 0; t < T; ++t) {
    checkUnrolled(c, before, t);
    std::vector<OnnxValue> in;
    for(const Expr& s : states) in.push_back(OnnxValue::of(s));
    for(size_t j = 0; j < xs.size(); ++j) {
      bool rev = j < inDirs.size() && inDirs[j] == 1;
      in.push_back(OnnxValue::of(takeAt(c, xs[j], axes[j], rev ? T - 1 - t : t)));
    }
    std::vector<OnnxValue> out = c.subgraph("body", in);
    for(size_t k = 0; k < states.size(); ++k) states[k] = out[k].tensor;
    for(size_t k = 0; k < nScanOut; ++k) outs[k].push_back(out[states.size() + k].tensor);
  }
  *finalStates = states;
  for(size_t k = 0; k < nScanOut; ++k) {
    c.check(!outs[k].empty(), "Scan over a zero-length axis is not supported");
    if(k < outDirs.size() && outDirs[k] == 1) std::reverse(outs[k].begin(), outs[k].end());
    int64_t r = outs[k][0]->shape().rank() + 1;
    int64_t a = c.axis(k < outAxes.size() ? outAxes[k] : 0, static_cast<int>(r), "scan_output_axes");
    scanOuts->push_back(stack(c, outs[k], a));
  }
}

ONYX_ONNX_IMPORT(kScan9, "Scan", 9).importer([](OnnxImportCtx& c) {
  int64_t m = c.attrInt("num_scan_inputs");
  c.check(m >= 1 && m <= static_cast<int64_t>(c.numInputs()), "num_scan_inputs ", m, " must be in 1..",
          c.numInputs(), " (the node's inputs)");
  size_t n = c.numInputs() - static_cast<size_t>(m);
  c.check(c.numOutputs() >= n, "Scan has ", c.numOutputs(), " outputs, fewer than its ", n, " states");
  std::vector<Expr> states, xs;
  for(size_t i = 0; i < n; ++i) states.push_back(c.input(i));
  for(size_t i = n; i < c.numInputs(); ++i) xs.push_back(c.input(i));
  size_t nScanOut = c.numOutputs() - n;
  std::vector<Expr> fin, scans;
  scanCore(c, states, xs, &fin, &scans, c.attrInts("scan_input_axes"), c.attrInts("scan_input_directions"),
           c.attrInts("scan_output_axes"), c.attrInts("scan_output_directions"), nScanOut);
  for(size_t k = 0; k < n; ++k) c.setOutput(k, fin[k]);
  for(size_t k = 0; k < nScanOut; ++k) c.setOutput(n + k, scans[k]);
});

// Opset 8: a leading batch axis on every input, the scan axis is 1.
ONYX_ONNX_IMPORT(kScan8, "Scan", 8).untilOpset(8).importer([](OnnxImportCtx& c) {
  c.check(!c.hasInput(0), "sequence_lens is not supported");
  int64_t m = c.attrInt("num_scan_inputs");
  std::vector<int64_t> dirs = c.attrInts("directions");
  c.check(m >= 1 && m < static_cast<int64_t>(c.numInputs()), "num_scan_inputs ", m, " must be in 1..",
          c.numInputs() - 1, " (the node's inputs after sequence_lens)");
  size_t n = c.numInputs() - 1 - static_cast<size_t>(m);
  c.check(c.numOutputs() >= n, "Scan has ", c.numOutputs(), " outputs, fewer than its ", n, " states");
  size_t nScanOut = c.numOutputs() - n;
  int64_t B = c.input(1)->shape().dims()[0];
  std::vector<std::vector<Expr>> fins(n), scans(nScanOut);
  c.check(B <= loopIterationLimit(), "the batch has ", B, " entries, more than ", loopIterationLimit(),
          " (the limit: SessionOptions::maxLoopIterations, --max-loop-iterations)");
  const size_t before = c.graph().size();
  for(int64_t b = 0; b < B; ++b) {
    checkUnrolled(c, before, b);
    std::vector<Expr> states, xs, fin, sc;
    for(size_t i = 0; i < n; ++i) states.push_back(takeAt(c, c.input(1 + i), 0, b));
    for(size_t i = 1 + n; i < c.numInputs(); ++i) xs.push_back(takeAt(c, c.input(i), 0, b));
    scanCore(c, states, xs, &fin, &sc, {}, dirs, {}, {}, nScanOut);
    for(size_t k = 0; k < n; ++k) fins[k].push_back(fin[k]);
    for(size_t k = 0; k < nScanOut; ++k) scans[k].push_back(sc[k]);
  }
  for(size_t k = 0; k < n; ++k) c.setOutput(k, stack(c, fins[k], 0));
  for(size_t k = 0; k < nScanOut; ++k) c.setOutput(n + k, stack(c, scans[k], 0));
});

// ---- sequences

int64_t position(OnnxImportCtx& c, size_t input, size_t size, bool insert) {
  std::vector<int64_t> ps = c.ints(input);  // exact (a double cast of 1e300 is undefined)
  c.check(ps.size() == 1, "position must hold one value, got ", ps.size());
  int64_t p = ps[0];
  int64_t n = static_cast<int64_t>(size);
  int64_t q = p < 0 && p >= -n ? p + n : p;
  c.check(q >= 0 && (insert ? q <= n : q < n), "position ", p, " is out of range for a sequence of ", n);
  return q;
}

Type seqType(OnnxImportCtx& c, size_t i) {
  OnnxValue v = c.inputValue(i);
  if(!v.sequence.empty()) return v.sequence[0]->value_type();
  return v.elemType;
}

ONYX_ONNX_IMPORT(kSequenceEmpty, "SequenceEmpty", 11).importer([](OnnxImportCtx& c) {
  c.setOutputValue(0, OnnxValue::seq({}, static_cast<Type>(c.attrInt("dtype", 1))));
});

ONYX_ONNX_IMPORT(kSequenceConstruct, "SequenceConstruct", 11).importer([](OnnxImportCtx& c) {
  std::vector<Expr> s;
  for(size_t i = 0; i < c.numInputs(); ++i) s.push_back(c.input(i));
  c.setOutputValue(0, OnnxValue::seq(s, s.empty() ? Type::undefined : s[0]->value_type()));
});

ONYX_ONNX_IMPORT(kSequenceAt, "SequenceAt", 11).importer([](OnnxImportCtx& c) {
  auto s = c.inputSequence(0);
  c.setOutput(0, s[static_cast<size_t>(position(c, 1, s.size(), false))]);
});

ONYX_ONNX_IMPORT(kSequenceInsert, "SequenceInsert", 11).importer([](OnnxImportCtx& c) {
  auto s = c.inputSequence(0);
  Type t = seqType(c, 0);
  int64_t p = c.hasInput(2) ? position(c, 2, s.size(), true) : static_cast<int64_t>(s.size());
  Expr x = c.input(1);
  s.insert(s.begin() + p, x);
  c.setOutputValue(0, OnnxValue::seq(s, t == Type::undefined ? x->value_type() : t));
});

ONYX_ONNX_IMPORT(kSequenceErase, "SequenceErase", 11).importer([](OnnxImportCtx& c) {
  auto s = c.inputSequence(0);
  Type t = seqType(c, 0);
  c.check(!s.empty(), "erase from an empty sequence");
  int64_t p = c.hasInput(1) ? position(c, 1, s.size(), false) : static_cast<int64_t>(s.size()) - 1;
  s.erase(s.begin() + p);
  c.setOutputValue(0, OnnxValue::seq(s, t));
});

ONYX_ONNX_IMPORT(kSequenceLength, "SequenceLength", 11).importer([](OnnxImportCtx& c) {
  c.setOutput(0, int64Scalar(c, static_cast<int64_t>(c.inputSequence(0).size())));
});

ONYX_ONNX_IMPORT(kSplitToSequence, "SplitToSequence", 11).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  int64_t r = x->shape().rank();
  int64_t axis = c.axis(c.attrInt("axis", 0), static_cast<int>(r), "axis");
  bool keepdims = c.attrInt("keepdims", 1) != 0;
  int64_t len = x->shape().dims()[axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if(!c.hasInput(1)) {
    sizes.assign(static_cast<size_t>(len), 1);
    squeeze = !keepdims;
  } else {
    Tensor sp = c.value(1);
    if(sp->shape().rank() == 0) {
      // (an integer tensor, read exactly: a uint64 past INT64_MAX through
      // a double was undefined behaviour, found by the fuzzer)
      const int64_t k = c.ints(1).at(0);
      c.check(k > 0, "split ", k, " must be positive");
      for(int64_t at = 0; at < len; at += k) sizes.push_back(std::min(k, len - at));
    } else {
      sizes = c.ints(1);
      int64_t sum = 0;
      for(auto s : sizes) {
        c.check(s >= 0 && s <= len, "split size ", s, " is outside 0..", len, " (axis ", axis, ")");
        sum += s;
      }
      c.check(sum == len, "split sizes sum to ", sum, ", axis ", axis, " has ", len);
    }
  }
  std::vector<Expr> out;
  int64_t at = 0;
  for(int64_t s : sizes) {
    Expr p = c.make("slice", {x}, {{"starts", attr(std::vector<int64_t>{at})}, {"ends", attr(std::vector<int64_t>{at + s})},
                                   {"axes", attr(std::vector<int64_t>{axis})}});
    if(squeeze) {
      auto d = dimsOf(p);
      d.erase(d.begin() + axis);
      p = c.make("reshape", {p}, {{"shape", attr(d)}});
    }
    out.push_back(p);
    at += s;
  }
  c.setOutputValue(0, OnnxValue::seq(out, x->value_type()));
});

ONYX_ONNX_IMPORT(kConcatFromSequence, "ConcatFromSequence", 11).importer([](OnnxImportCtx& c) {
  auto s = c.inputSequence(0);
  c.check(!s.empty(), "concatenation of an empty sequence");
  bool newAxis = c.attrInt("new_axis", 0) != 0;
  int64_t r = s[0]->shape().rank() + (newAxis ? 1 : 0);
  int64_t axis = c.axis(c.attrInt("axis"), static_cast<int>(r), "axis");
  if(newAxis) {
    c.setOutput(0, stack(c, s, axis));
    return;
  }
  c.setOutput(0, s.size() == 1 ? s[0] : c.make("concat", s, {{"axis", axis}}));
});

ONYX_ONNX_IMPORT(kSequenceMap, "SequenceMap", 17).importer([](OnnxImportCtx& c) {
  auto first = c.inputSequence(0);
  size_t n = first.size();
  std::vector<OnnxValue> ins;
  for(size_t i = 0; i < c.numInputs(); ++i) ins.push_back(c.inputValue(i));
  for(const auto& v : ins)
    if(v.kind == OnnxValue::Kind::Sequence) c.check(v.sequence.size() == n, "sequences of different lengths");
  std::vector<std::vector<Expr>> outs(c.numOutputs());
  for(size_t k = 0; k < n; ++k) {
    std::vector<OnnxValue> in;
    for(const auto& v : ins) in.push_back(v.kind == OnnxValue::Kind::Sequence ? OnnxValue::of(v.sequence[k]) : v);
    auto out = c.subgraph("body", in);
    for(size_t j = 0; j < outs.size(); ++j) outs[j].push_back(out[j].tensor);
  }
  for(size_t j = 0; j < outs.size(); ++j) c.setOutputValue(j, OnnxValue::seq(outs[j], c.declaredOutputType(j)));
});

// ---- optionals: a present optional is its value; an absent one is None.

ONYX_ONNX_IMPORT(kOptional, "Optional", 15).importer([](OnnxImportCtx& c) {
  if(c.hasAttr("type")) c.ignoreAttr("type");
  if(c.numInputs() > 0 && c.hasInput(0)) c.setOutputValue(0, c.inputValue(0));
  else c.setOutputValue(0, OnnxValue::none(c.declaredOutputType(0)));
});

ONYX_ONNX_IMPORT(kOptionalHasElement, "OptionalHasElement", 15).importer([](OnnxImportCtx& c) {
  bool has = c.numInputs() > 0 && c.hasInput(0) && c.inputValue(0).kind != OnnxValue::Kind::None;
  c.setOutput(0, boolScalar(c, has));
});

ONYX_ONNX_IMPORT(kOptionalGetElement, "OptionalGetElement", 15).importer([](OnnxImportCtx& c) {
  OnnxValue v = c.inputValue(0);
  c.check(v.kind != OnnxValue::Kind::None, "the optional input is empty");
  c.setOutputValue(0, v);
});

}  // namespace
}  // namespace onyx
