// CPU element-wise and reduction primitives with ONNX/numpy broadcasting.
//
//   elementwise<TOut, TIn...>(f, out, ins...)  out[i] = f(out[i], in...[i])
//   Element(_1 = sin(_2), out, in)               same, all tensors one type
//   reduce<T>(in, out, init, combine)            out has in's rank with 1s on
//                                                reduced axes (or fewer leading
//                                                dims: a broadcast-sum target)
// Values are loaded in their compute type (float for float16/bfloat16).
#pragma once
#include <algorithm>
#include <array>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include <cstdint>

#include <onyx/backend/cpu/functional.h>
#include <onyx/backend/cpu/parallel.h>
#include <onyx/core/dispatch.h>
#include <onyx/core/tensor.h>

namespace onyx {
namespace host {

template <class T>
inline typename ComputeOf<T>::type load(const T* p, int64_t i) {
  // A bool is read as its byte: an output buffer not yet written (its old
  // value is passed to every functor) may hold any byte, and reading that
  // as bool is undefined.
  if constexpr(std::is_same<T, bool>::value) return reinterpret_cast<const unsigned char*>(p)[i] != 0;
  else return static_cast<typename ComputeOf<T>::type>(p[i]);
}
template <class T, class V>
inline void store(T* p, int64_t i, V v) {
  if constexpr(std::is_same<T, bool>::value) p[i] = v != V(0);
  else p[i] = static_cast<T>(static_cast<typename ComputeOf<T>::type>(v));
}

// Iteration plan: out's dims with every input's strides in out's index space
// (0 where broadcast), adjacent dims merged when all tensors allow it.
template <size_t K>
struct BroadcastPlan {
  int rank = 0;
  int64_t dims[16];
  int64_t strides[K][16];
  int64_t total = 1;

  BroadcastPlan(const Shape& out, const std::array<const Shape*, K>& ins) {
    ONYX_CHECK(out.size() <= 16, "tensors of rank ", out.size(), " are not supported (at most 16)");
    int r = out.rank();
    int64_t d[16], s[K][16];
    for(int i = 0; i < r; ++i) d[i] = out.dims()[i];
    for(size_t k = 0; k < K; ++k) {
      const Shape& in = *ins[k];
      int off = r - in.rank();
      ONYX_ASSERT(off >= 0, "input rank ", in.rank(), " above output rank ", r);
      int64_t st = 1;
      for(int i = r - 1; i >= 0; --i) {
        int64_t di = i >= off ? in.dims()[i - off] : 1;
        ONYX_ASSERT(di == d[i] || di == 1, "shape ", in, " does not broadcast to ", out);
        s[k][i] = (di == 1 && d[i] != 1) ? 0 : st;
        st *= di;
      }
    }
    // Drop size-1 dims, merge dims that are contiguous for every tensor.
    for(int i = 0; i < r; ++i) {
      total *= d[i];
      if(d[i] == 1) continue;
      bool merge = rank > 0;
      for(size_t k = 0; k < K && merge; ++k) merge = strides[k][rank - 1] == s[k][i] * d[i];
      if(merge) {
        dims[rank - 1] *= d[i];
        for(size_t k = 0; k < K; ++k) strides[k][rank - 1] = s[k][i];
      } else {
        dims[rank] = d[i];
        for(size_t k = 0; k < K; ++k) strides[k][rank] = s[k][i];
        ++rank;
      }
    }
    if(rank == 0) {
      rank = 1;
      dims[0] = total;  // 1 or 0
      for(size_t k = 0; k < K; ++k) strides[k][0] = 1;
    }
  }

  // fn(outOffset, inOffsets[K], n, inSteps[K]): a run of n elements along the
  // innermost dim. Runs are split across threads.
  template <class Fn>
  void run(Fn&& fn) const {
    if(total == 0) return;
    int64_t inner = dims[rank - 1];
    int64_t rows = total / inner;
    std::array<int64_t, K> step;
    for(size_t k = 0; k < K; ++k) step[k] = strides[k][rank - 1];
    if(rows == 1) {  // one run (equal shapes, a scalar operand): split the run itself
      parallelFor(inner, total * int64_t(K + 1), [&](int64_t b, int64_t e) {
        std::array<int64_t, K> off;
        for(size_t k = 0; k < K; ++k) off[k] = b * step[k];
        fn(b, off, e - b, step);
      });
      return;
    }
    parallelFor(rows, total * int64_t(K + 1), [&](int64_t b, int64_t e) {
      for(int64_t row = b; row < e; ++row) {
        std::array<int64_t, K> off{};
        int64_t rem = row;
        for(int i = rank - 2; i >= 0; --i) {
          int64_t idx = rem % dims[i];
          rem /= dims[i];
          for(size_t k = 0; k < K; ++k) off[k] += idx * strides[k][i];
        }
        fn(row * inner, off, inner, step);
      }
    });
  }
};

template <class Fn, size_t... I>
void callWithIndices(Fn&& fn, std::index_sequence<I...>) {
  fn(std::integral_constant<size_t, I>{}...);
}

template <class TOut, class... TIn, class F, class... Ts>
void elementwise(F f, TensorBase& out, const Ts&... ins) {
  static_assert(sizeof...(TIn) == sizeof...(Ts), "one C++ type per input tensor");
  constexpr size_t K = sizeof...(Ts);
  TOut* o = out.data<TOut>();
  std::tuple<const TIn*...> ptrs{ins.template data<TIn>()...};
  if constexpr(K == 0) {
    parallelFor(out.size(), out.size(), [&](int64_t b, int64_t e) {
      for(int64_t i = b; i < e; ++i) store(o, i, f(load(o, i)));
    });
  } else {
    BroadcastPlan<K> plan(out.shape(), {&ins.shape()...});
    plan.run([&](int64_t oo, const std::array<int64_t, K>& off, int64_t n, const std::array<int64_t, K>& st) {
      // The common runs of float inputs get loops without per-element stride
      // math, which the compiler vectorizes: every input contiguous, or (two
      // inputs) one of them a single value read once (a scalar, or a
      // per-channel [C,1,1] operand over a row of H*W). Integer types keep the
      // one loop (code size: the families instantiate every functor for them).
      constexpr bool kFloatIn = (std::is_floating_point<typename ComputeOf<TIn>::type>::value || ...);
      if constexpr(K == 2 && kFloatIn) {
        const auto* p0 = std::get<0>(ptrs) + off[0];
        const auto* p1 = std::get<1>(ptrs) + off[1];
        if(st[0] == 1 && st[1] == 0) {
          const auto w = load(p1, 0);
          for(int64_t j = 0; j < n; ++j) store(o, oo + j, f(load(o, oo + j), load(p0, j), w));
          return;
        }
        if(st[0] == 0 && st[1] == 1) {
          const auto u = load(p0, 0);
          for(int64_t j = 0; j < n; ++j) store(o, oo + j, f(load(o, oo + j), u, load(p1, j)));
          return;
        }
      }
      bool contiguous = kFloatIn;
      for(size_t k = 0; k < K; ++k) contiguous = contiguous && st[k] == 1;
      auto body = [&](auto... idx) {
        if(contiguous) {
          for(int64_t j = 0; j < n; ++j)
            store(o, oo + j, f(load(o, oo + j), load(std::get<idx>(ptrs), off[idx] + j)...));
        } else {
          for(int64_t j = 0; j < n; ++j)
            store(o, oo + j, f(load(o, oo + j), load(std::get<idx>(ptrs), off[idx] + j * st[idx])...));
        }
      };
      callWithIndices(body, std::make_index_sequence<K>{});
    });
  }
}

// Seed-style entry point: every tensor has out's element type.
template <class F, class... Ts>
void Element(F f, const Tensor& out, const Ts&... ins) {
  dispatchAll(out->type(), "Element", [&](auto tag) {
    using T = typename decltype(tag)::type;
    elementwise<T, std::conditional_t<true, T, Ts>...>(f, *out, *ins...);
  });
}

// Where the elements of a reduction are: `in` reduced into `out`, whose
// shape broadcasts to in's (in's rank with 1s on the reduced axes, or fewer
// leading dims). Output o combines the redN elements at
// base(o) + offset(j), j in [0, redN). Shared by the CPU and GPU kernels.
struct ReducePlan {
  int nk = 0, nr = 0;
  int64_t keptDims[16], keptStr[16], redDims[16], redStr[16];
  int64_t outN = 1, redN = 1;

  ReducePlan(const Shape& is, const Shape& os) {
    int r = is.rank();
    int off = r - os.rank();
    ONYX_CHECK(r <= 16, "tensors of rank ", r, " are not supported (at most 16)");
    ONYX_ASSERT(off >= 0, "reduce target ", os, " has higher rank than ", is);
    auto st = is.strides();
    // Neighbouring axes of one kind merge into one (a global average pool's
    // H and W are one run of H*W): same offsets in the same order, without a
    // division per element.
    int last = 0;  // kind of the last axis of size > 1: 1 kept, 2 reduced
    for(int i = 0; i < r; ++i) {
      int64_t od = i >= off ? os.dims()[i - off] : 1;
      int64_t id = is.dims()[i];
      if(od == id && !(id == 1)) {
        if(last == 1 && keptStr[nk - 1] == id * st[i]) { keptDims[nk - 1] *= id; keptStr[nk - 1] = st[i]; }
        else { keptDims[nk] = id; keptStr[nk++] = st[i]; }
        last = 1;
      } else if(od == 1 && id != 1) {
        if(last == 2 && redStr[nr - 1] == id * st[i]) { redDims[nr - 1] *= id; redStr[nr - 1] = st[i]; }
        else { redDims[nr] = id; redStr[nr++] = st[i]; }
        last = 2;
      } else {
        ONYX_ASSERT(id == 1 || od == id, "cannot reduce ", is, " into ", os);
      }
    }
    outN = os.elements();
    for(int i = 0; i < nr; ++i) redN *= redDims[i];
  }
  // Offset in `in` of output o's first element.
  ONYX_HD int64_t base(int64_t o) const {
    int64_t b = 0, rem = o;
    for(int i = nk - 1; i >= 0; --i) { b += (rem % keptDims[i]) * keptStr[i]; rem /= keptDims[i]; }
    return b;
  }
  // Offset of the j-th reduced element from base.
  ONYX_HD int64_t offset(int64_t j) const {
    if(nr == 1) return j * redStr[0];
    int64_t p = 0, q = j;
    for(int i = nr - 1; i >= 0; --i) { p += (q % redDims[i]) * redStr[i]; q /= redDims[i]; }
    return p;
  }
};

// combine(...combine(init, get(0))..., get(n - 1)) with the elements dealt
// round-robin into four accumulators joined by merge(acc, acc) at the end:
// four independent chains instead of one chain of dependent adds, which
// bounded every long sum (reductions, layer norm, softmax).
template <class Acc, class Get, class Combine, class Merge>
Acc foldInFour(int64_t n, Acc init, Get get, Combine combine, Merge merge) {
  Acc a0 = init, a1 = init, a2 = init, a3 = init;
  int64_t j = 0;
  for(; j + 4 <= n; j += 4) {
    a0 = combine(a0, get(j));
    a1 = combine(a1, get(j + 1));
    a2 = combine(a2, get(j + 2));
    a3 = combine(a3, get(j + 3));
  }
  for(; j < n; ++j) a0 = combine(a0, get(j));
  return merge(merge(a0, a1), merge(a2, a3));
}

// The sum of get(j) over [0, n) in double, four partial sums.
template <class Get>
double sumInFour(int64_t n, Get get) {
  auto plus = [](double a, double b) { return a + b; };
  return foldInFour(n, 0.0, [&](int64_t j) { return double(get(j)); }, plus, plus);
}

// Reduction of `in` into `out` (ReducePlan): each out element combines all
// in elements that broadcast from it. Acc is the accumulator type;
// combine(acc, element) folds an element in, finish(acc, count) gives the
// stored value.
template <class T, class Acc, class Combine, class Finish>
void reduceInto(const TensorBase& in, TensorBase& out, Acc init, Combine combine, Finish finish) {
  reduceInto<T, Acc>(in, out, init, combine, nullptr, finish);
}

// The same with merge(acc, acc), which joins two partial results: a
// contiguous run is then folded in four (foldInFour; a 56x56 average pool
// ran at a tenth of memory speed as one chain).
template <class T, class Acc, class Combine, class Merge, class Finish>
void reduceInto(const TensorBase& in, TensorBase& out, Acc init, Combine combine, Merge merge, Finish finish) {
  ReducePlan p(in.shape(), out.shape());
  const T* ip = in.data<T>();
  T* op = out.data<T>();
  constexpr bool canSplit = !std::is_same<Merge, std::nullptr_t>::value;
  if(p.nk == 1 && p.keptStr[0] == 1 && p.nr == 1 && p.redStr[0] == p.outN) {
    // Column sums ([R, N] -> [N]: a bias gradient, a batch mean): whole rows
    // folded into a block of outputs, so memory is read in order instead of
    // one strided element per output (8x128x1024 -> 1024: 2.7 -> 0.3 ms).
    // Each output combines its elements in the same order as below.
    constexpr int64_t kCols = 128;
    parallelFor((p.outN + kCols - 1) / kCols, in.size(), [&](int64_t b, int64_t e) {
      std::vector<Acc> acc(static_cast<size_t>(kCols), init);
      for(int64_t blk = b; blk < e; ++blk) {
        const int64_t c0 = blk * kCols, nc = std::min(kCols, p.outN - c0);
        std::fill(acc.begin(), acc.end(), init);
        for(int64_t j = 0; j < p.redN; ++j) {
          const T* row = ip + j * p.outN + c0;
          for(int64_t c = 0; c < nc; ++c) acc[size_t(c)] = combine(acc[size_t(c)], static_cast<Acc>(load(row, c)));
        }
        for(int64_t c = 0; c < nc; ++c) store(op, c0 + c, finish(acc[size_t(c)], p.redN));
      }
    });
    return;
  }
  parallelFor(p.outN, in.size(), [&](int64_t b, int64_t e) {
    for(int64_t o = b; o < e; ++o) {
      int64_t base = p.base(o);
      Acc acc = init;
      if constexpr(canSplit) {
        if(p.nr == 1 && p.redStr[0] == 1 && p.redN >= 16) {
          const T* x = ip + base;
          auto get = [x](int64_t j) { return static_cast<Acc>(load(x, j)); };
          store(op, o, finish(foldInFour(p.redN, init, get, combine, merge), p.redN));
          continue;
        }
        if(p.nr == 2 && p.redStr[1] == 1 && p.redDims[1] >= 16) {
          // Reduced axes around a kept one whose innermost run is
          // contiguous ([N, C, H*W] -> [C]: batch statistics, bias
          // gradients): each run folded in four, the runs merged in order
          // (was one offset computation with two divisions per element:
          // 32x64x112x112 -> 64 took 100 ms, now memory speed).
          const int64_t runs = p.redDims[0], len = p.redDims[1], st = p.redStr[0];
          for(int64_t q = 0; q < runs; ++q) {
            const T* x = ip + base + q * st;
            auto get = [x](int64_t j) { return static_cast<Acc>(load(x, j)); };
            acc = merge(acc, foldInFour(len, init, get, combine, merge));
          }
          store(op, o, finish(acc, p.redN));
          continue;
        }
      }
      if(p.nr == 1) {  // one reduced axis (the common case): a plain strided loop
        const int64_t st = p.redStr[0];
        for(int64_t j = 0; j < p.redN; ++j) acc = combine(acc, static_cast<Acc>(load(ip, base + j * st)));
      } else {
        for(int64_t j = 0; j < p.redN; ++j) acc = combine(acc, static_cast<Acc>(load(ip, base + p.offset(j))));
      }
      store(op, o, finish(acc, p.redN));
    }
  });
}

// Accumulator type: double for floating types (stable sums of many floats),
// int64 for integers.
template <class T>
using AccOf = std::conditional_t<std::is_floating_point<typename ComputeOf<T>::type>::value, double,
                                 std::conditional_t<std::is_signed<T>::value, int64_t, uint64_t>>;

}  // namespace host
}  // namespace onyx
