// bench-graph-build: nanoseconds per node to (re)build a graph, the cost a
// dynamic graph pays every batch. A measurement, not a test.
//   build/tools/bench-graph-build [--nodes N] [--reps R]
#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <onyx/onyx.h>

using namespace onyx;

int main(int argc, char** argv) {
  CLI::App app{"Times graph construction (ns per node) over repeated rebuilds.\n\nExample:\n  bench-graph-build --nodes 100000 --reps 5"};
  int nodes = 100000, reps = 5;
  app.add_option("--nodes", nodes, "op nodes per build")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "rebuilds (the first grows the node pool)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  auto g = New<ExpressionGraph>();
  for(int rep = 0; rep < reps; ++rep) {
    g->clear();
    auto x = g->param("a", {4, 4}, inits::ones());
    auto y = g->param("b", {4, 4}, inits::ones());
    auto t0 = std::chrono::steady_clock::now();
    Expr h = x;
    for(int i = 0; i < nodes; ++i) h = (i & 1) ? h + y : tanh(h);
    auto t1 = std::chrono::steady_clock::now();
    std::cout << "build " << rep << ": " << std::chrono::duration<double, std::nano>(t1 - t0).count() / nodes
              << " ns/node (" << g->size() << " nodes)\n";
  }
  return 0;
}
