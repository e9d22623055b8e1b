// fma-peak: the float32 multiply-add throughput this machine reaches, in
// GFLOP/s, on 1 and N threads: the ceiling that tools/bench_vs_ort.py
// divides each model's GFLOP/s by. A measurement, not a test.
//
//   fma-peak                      # 1 thread and all of OpenMP's
//   fma-peak --threads 1 --threads 2 --json
//   fma-peak --isa avx2
//
// Each thread runs independent FMA chains, acc = acc * a + b, on vector
// registers: with more chains than (FMA latency x FMA ports) the FMA units
// never wait for a result, so the rate is the units' throughput. 16 chains of
// 512 bits (AVX-512, 32 registers) or 12 of 256 bits (AVX2, 16 registers)
// cover 4-cycle latency on two ports. a < 1 and b > 0 keep every value near
// 1 (no overflow, no denormals, which would slow some CPUs down).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

constexpr int kChains512 = 16;
constexpr int kChains256 = 12;

// Returns a value that depends on every chain so that none is optimised away.
__attribute__((target("avx512f"))) float chains512(int64_t iters) {
  __m512 acc[kChains512];
  for(int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(j));
  const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(0.0001f);
  for(int64_t i = 0; i < iters; ++i)
    for(int j = 0; j < kChains512; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  __m512 s = acc[0];
  for(int j = 1; j < kChains512; ++j) s = _mm512_add_ps(s, acc[j]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float r = 0;
  for(float v : lanes) r += v;
  return r;
}

__attribute__((target("avx2,fma"))) float chains256(int64_t iters) {
  __m256 acc[kChains256];
  for(int j = 0; j < kChains256; ++j) acc[j] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(j));
  const __m256 a = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(0.0001f);
  for(int64_t i = 0; i < iters; ++i)
    for(int j = 0; j < kChains256; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  __m256 s = acc[0];
  for(int j = 1; j < kChains256; ++j) s = _mm256_add_ps(s, acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float r = 0;
  for(float v : lanes) r += v;
  return r;
}

struct Isa {
  std::string name;
  double flopsPerIter;  // per thread per loop iteration: chains x lanes x 2
  float (*run)(int64_t);
};

// Seconds for `threads` threads each running `iters` iterations (wall clock,
// the parallel region's start to its end).
double timeRun(const Isa& isa, int threads, int64_t iters, float& sink) {
  auto t0 = std::chrono::steady_clock::now();
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  total += isa.run(iters);
  auto t1 = std::chrono::steady_clock::now();
  sink += total;
  return std::chrono::duration<double>(t1 - t0).count();
}

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while(std::getline(f, line))
    if(line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if(p != std::string::npos) return line.substr(line.find_first_not_of(" \t", p + 1));
    }
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measures the float32 FMA peak (GFLOP/s) on 1 and N threads.\n\n"
               "Examples:\n"
               "  fma-peak\n"
               "  fma-peak --threads 1 --threads 2 --json\n"};
  std::vector<int> threadCounts;
  std::string isaName = "auto";
  double seconds = 0.3;
  int reps = 3;
  bool json = false;
  app.add_option("--threads", threadCounts, "thread counts to measure (default: 1 and OpenMP's maximum)")
      ->check(CLI::PositiveNumber);
  app.add_option("--isa", isaName, "auto (AVX-512 where the CPU has it, else AVX2), avx512 or avx2")
      ->check(CLI::IsMember({"auto", "avx512", "avx2"}))
      ->capture_default_str();
  app.add_option("--seconds", seconds, "length of one timed run")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--reps", reps, "timed runs per thread count; the fastest is reported")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object instead of text");
  CLI11_PARSE(app, argc, argv);

  __builtin_cpu_init();
  bool has512 = __builtin_cpu_supports("avx512f"), has256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if(isaName == "auto") isaName = has512 ? "avx512" : "avx2";
  if((isaName == "avx512" && !has512) || (isaName == "avx2" && !has256)) {
    std::cerr << "fma-peak: this CPU has no " << isaName << (isaName == "avx2" ? " with FMA" : "") << "\n";
    return 1;
  }
  Isa isa = isaName == "avx512" ? Isa{"avx512f", kChains512 * 16 * 2.0, chains512}
                                : Isa{"avx2+fma", kChains256 * 8 * 2.0, chains256};
  if(threadCounts.empty()) {
    threadCounts.push_back(1);
    if(omp_get_max_threads() > 1) threadCounts.push_back(omp_get_max_threads());
  }

  float sink = 0;
  // Calibrate on one thread: iterations for about `seconds` per run.
  int64_t iters = 1 << 16;
  for(;;) {
    double t = timeRun(isa, 1, iters, sink);
    if(t > 0.02 || iters > (int64_t(1) << 40)) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds / t));
      break;
    }
    iters *= 4;
  }

  std::vector<double> gflops;
  for(int threads : threadCounts) {
    double best = 0;
    timeRun(isa, threads, iters / 10 + 1, sink);  // wakes the threads and the clocks
    for(int r = 0; r < reps; ++r) {
      double t = timeRun(isa, threads, iters, sink);
      best = std::max(best, isa.flopsPerIter * static_cast<double>(iters) * threads / t / 1e9);
    }
    gflops.push_back(best);
  }

  if(json) {
    std::printf("{\"cpu\": \"%s\", \"isa\": \"%s\", \"results\": [", cpuModel().c_str(), isa.name.c_str());
    for(size_t i = 0; i < threadCounts.size(); ++i)
      std::printf("%s{\"threads\": %d, \"gflops\": %.2f}", i ? ", " : "", threadCounts[i], gflops[i]);
    std::printf("], \"sink\": %g}\n", static_cast<double>(sink));
  } else {
    std::printf("cpu: %s\nisa: %s (%d independent FMA chains per thread)\n", cpuModel().c_str(), isa.name.c_str(),
                isaName == "avx512" ? kChains512 : kChains256);
    for(size_t i = 0; i < threadCounts.size(); ++i)
      std::printf("threads %d: %.1f GFLOP/s fp32 (%.1f per thread)\n", threadCounts[i], gflops[i],
                  gflops[i] / threadCounts[i]);
  }
  return 0;
}
