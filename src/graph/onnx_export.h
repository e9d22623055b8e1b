// How a graph node becomes ONNX nodes: the export context, the contract
// between the ONNX rules of the registry ops (graph/onnx_rule.h; src/ops/*.cpp
// say how each op exports, next to the op and its import) and the exporter in
// converters/ (which writes the protobuf and implements OnnxExportCtx).
// Protobuf never leaks into src/.
//
// The exporter picks, for a node, the first ONNX rule of its op whose
// opset range holds the target opset (`.onnx("Resize", 10)` before
// `.onnx("Upsample", 7)` makes Resize win at 10+). With no `.exporter(fn)`
// the default export applies: the node's inputs in order, each attribute of
// the op under its own name. The default export drops an attribute that the
// ONNX schema of that opset lacks when it holds its default value and fails
// when it does not (so a friendly attribute with no ONNX form can never be
// silently lost), and leaves out empty lists (ONNX's "absent").
//   ...onnx("Clip", 11).exporter([](OnnxExportCtx& c) {
//        c.emit("Clip", {c.input(0), c.scalarConst(lo, t), c.scalarConst(hi, t)}, {c.output()});
//      })
// An op with no 1:1 ONNX op but a composite ONNX form declares it with
// `.onnxExport(since, fn)`: the node exports as several ONNX nodes; an ONNX
// file never imports back into that op (its import is a composite rule, or
// the exported nodes import as the ops they are).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <onyx/core/error.h>
#include <onyx/core/tensor.h>
#include <onyx/graph/attrs.h>
#include <onyx/graph/node.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

using OnnxAttrs = std::vector<std::pair<std::string, AttrValue>>;

class OnnxExportCtx {
public:
  virtual ~OnnxExportCtx() = default;

  // ---- the node being exported
  virtual const Node& node() const = 0;
  Attrs attrs() const { return node().attrs(); }
  virtual int opset(const std::string& domain = "") const = 0;  // the target opset
  size_t numInputs() const { return node().numChildren(); }
  const Shape& inputShape(size_t i) const { return node().child(i)->shape(); }
  Type inputType(size_t i) const { return node().child(i)->value_type(); }

  // ---- value names
  virtual std::string input(size_t i) = 0;  // the ONNX name of input i's value
  virtual std::string output() = 0;         // the ONNX name of this node's value
  // A fresh name for an intermediate value of a composite export.
  virtual std::string fresh(const std::string& hint) = 0;
  // An initializer holding `t` (named after the node and `hint`); returns its name.
  virtual std::string constant(const Tensor& t, const std::string& hint) = 0;
  std::string intsConst(const std::vector<int64_t>& v, const std::string& hint);  // 1-D int64
  std::string scalarConst(double v, Type t, const std::string& hint);              // 0-D of type t

  // ---- emitting
  virtual void emit(const std::string& opType, const std::vector<std::string>& inputs,
                    const std::vector<std::string>& outputs, const OnnxAttrs& attrs = {},
                    const std::string& domain = "") = 0;
  // The default export of this node as `opType`, with `inputs` (default: the
  // node's inputs), its attributes by name minus `skip`, plus `extra`.
  virtual void emitDefault(const std::string& opType, const std::vector<std::string>& inputs = {},
                           const std::vector<std::string>& skip = {}, const OnnxAttrs& extra = {}) = 0;
  std::vector<std::string> inputs();  // all input names
  // Emits a Cast of value `v` to type `to`; returns the fresh name (`hint`) of the result.
  std::string emitCast(const std::string& v, Type to, const std::string& hint);
  // The node's attributes by name, empty lists left out (what the default
  // export writes, without its schema check): for exporters that emit the
  // same op with other inputs, e.g. around a Cast bridge.
  OnnxAttrs nodeAttrs() const;

  // The node's ONNX form needs opset `need` or later for `what` (an
  // attribute value, an element type). With an automatic target opset the
  // exporter restarts at `need`; with an explicit one it is an error naming
  // the node: "<what> needs opset N or later (export with --opset N)".
  virtual void requireOpset(int need, const std::string& what) = 0;

  // Throws onyx::Error "node 'n' (op, opset N): message".
  template <class... A>
  [[noreturn]] void fail(const A&... a) const { failMsg(str(a...)); }
  template <class... A>
  void check(bool cond, const A&... a) const { if(!cond) failMsg(str(a...)); }

  // "node 'n' (op, opset N)", the prefix of every export error.
  virtual std::string where() const = 0;

private:
  [[noreturn]] void failMsg(const std::string& msg) const;
};

}  // namespace onyx
