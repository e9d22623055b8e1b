// onyx-ops: lists the op registry. `onyx-ops --markdown` writes the table in
// docs/operators.md (a test keeps that file equal to this output).
#include <iostream>

#include <CLI/CLI.hpp>
#include <onyx/onyx.h>

using namespace onyx;

namespace {

std::string onnxColumn(const OpDef& op) {
  if(op.onnxRules.empty()) return "— (" + op.noOnnxWhy + ")";
  std::string s;
  for(const OnnxRule& r : op.onnxRules) {
    if(!s.empty()) s += ", ";
    if(!r.importable()) {
      s += "composite export " + std::to_string(r.since);
      s += r.until >= kOpsetOpen ? "+" : "–" + std::to_string(r.until);
      if(!op.noOnnxWhy.empty()) s += " (" + op.noOnnxWhy + ")";
      continue;
    }
    s += (r.domain.empty() ? "" : r.domain + ".") + r.opType + " " + std::to_string(r.since);
    s += r.until >= kOpsetOpen ? "+" : "–" + std::to_string(r.until);
  }
  return s;
}

std::string attrsColumn(const OpDef& op) {
  std::string s;
  for(auto& a : op.attrSpecs) s += (s.empty() ? "" : ", ") + a.name + "=" + attrToString(a.defaultValue);
  return s.empty() ? "" : "`" + s + "`";
}

std::string escape(std::string s) {
  std::string r;
  for(char c : s) r += c == '|' ? std::string("\\|") : std::string(1, c);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lists Onyx's op registry.\n\nExamples:\n  onyx-ops\n  onyx-ops --markdown > docs/operators.md"};
  bool markdown = false;
  app.add_flag("--markdown", markdown, "print the docs/operators.md table");
  CLI11_PARSE(app, argc, argv);
  auto ops = Registry::instance().all();
  if(!markdown) {
    for(const OpDef* op : ops) std::cout << op->name << "\t" << op->family << "\t" << onnxColumn(*op) << "\n";
    return 0;
  }
  std::cout << "# Operators\n\n"
            << "Generated from the op registry by `onyx-ops --markdown` (a test checks it is current).\n"
            << "Each op is declared once, in `src/ops/<family>.cpp`.\n\n"
            << "| op | family | math | attributes | gradient | ONNX (op since–until) |\n"
            << "|---|---|---|---|---|---|\n";
  for(const OpDef* op : ops)
    std::cout << "| `" << op->name << "` | " << op->family << " | " << escape(op->docString) << " | "
              << escape(attrsColumn(*op)) << " | "
              << (op->differentiable() ? "yes" : "no (" + escape(op->notDifferentiableWhy) + ")") << " | "
              << escape(onnxColumn(*op)) << " |\n";
  std::cout << "\n" << ops.size() << " ops.\n";
  return 0;
}
