// The CPU's strided copy (strided.h): rows of one memcpy, or tiles where
// the copy transposes.
#include <onyx/backend/cpu/strided.h>

#include <algorithm>
#include <cstring>

#include <onyx/backend/cpu/parallel.h>

namespace onyx {
namespace host {

namespace {

template <size_t E>
void copyRunOf(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n) {
  for(int64_t j = 0; j < n; ++j) std::memcpy(dst + j * ds * int64_t(E), src + j * ss * int64_t(E), E);
}

// n elements of `esize` bytes, dst and src strides in elements.
void copyRun(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n, size_t esize) {
  if(ds == 1 && ss == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * esize);
    return;
  }
  switch(esize) {
    case 1: copyRunOf<1>(dst, ds, src, ss, n); return;
    case 2: copyRunOf<2>(dst, ds, src, ss, n); return;
    case 4: copyRunOf<4>(dst, ds, src, ss, n); return;
    case 8: copyRunOf<8>(dst, ds, src, ss, n); return;
    default:
      for(int64_t j = 0; j < n; ++j) std::memcpy(dst + j * ds * int64_t(esize), src + j * ss * int64_t(esize), esize);
  }
}

template <size_t E>
void copyTileOf(char* dst, int64_t dj, int64_t di, const char* src, int64_t sj, int64_t si, int64_t nj, int64_t ni) {
  for(int64_t j = 0; j < nj; ++j)
    for(int64_t i = 0; i < ni; ++i)
      std::memcpy(dst + (j * dj + i * di) * int64_t(E), src + (j * sj + i * si) * int64_t(E), E);
}

// A transpose-like copy: the innermost dim is contiguous in dst but strided in
// src, while dim j is contiguous in src. Row by row it would read one element
// per cache line; tiles of both dims reuse each line read.
void copyTiled(char* dst, const int64_t* a, const char* src, const int64_t* b, const int64_t* d, int n, int j,
               int64_t total, size_t esize) {
  constexpr int64_t kTile = 32;
  int64_t e = static_cast<int64_t>(esize), inner = d[n - 1], tilesJ = (d[j] + kTile - 1) / kTile;
  int64_t outer = total / (inner * d[j]);
  parallelFor(outer * tilesJ, total, [&](int64_t lo, int64_t hi) {
    for(int64_t task = lo; task < hi; ++task) {
      int64_t rem = task / tilesJ, j0 = (task % tilesJ) * kTile, od = 0, os = 0;
      for(int k = n - 2; k >= 0; --k) {
        if(k == j) continue;
        int64_t idx = rem % d[k];
        rem /= d[k];
        od += idx * a[k];
        os += idx * b[k];
      }
      int64_t nj = std::min(kTile, d[j] - j0);
      for(int64_t i0 = 0; i0 < inner; i0 += kTile) {
        int64_t ni = std::min(kTile, inner - i0);
        char* t = dst + (od + j0 * a[j] + i0) * e;
        const char* f = src + (os + j0 + i0 * b[n - 1]) * e;
        switch(esize) {
          case 1: copyTileOf<1>(t, a[j], 1, f, 1, b[n - 1], nj, ni); break;
          case 2: copyTileOf<2>(t, a[j], 1, f, 1, b[n - 1], nj, ni); break;
          case 4: copyTileOf<4>(t, a[j], 1, f, 1, b[n - 1], nj, ni); break;
          case 8: copyTileOf<8>(t, a[j], 1, f, 1, b[n - 1], nj, ni); break;
          default:
            for(int64_t jj = 0; jj < nj; ++jj)
              for(int64_t ii = 0; ii < ni; ++ii)
                std::memcpy(t + (jj * a[j] + ii) * e, f + (jj + ii * b[n - 1]) * e, esize);
        }
      }
    }
  });
}

}  // namespace

// Size-1 dims are dropped and dims that are contiguous for both sides merged
// (StridedPlan), so a copy that is dense on both sides becomes one memcpy per
// row.
void copyStrided(void* dstv, const int64_t* ds, const void* srcv, const int64_t* ss, const int64_t* dims, int rank,
                 size_t esize) {
  StridedPlan p(ds, ss, dims, rank);
  if(p.total == 0) return;
  int n = p.n;
  const int64_t *d = p.d, *a = p.a, *b = p.b;
  int64_t total = p.total;
  char* dst = static_cast<char*>(dstv);
  const char* src = static_cast<const char*>(srcv);
  if(a[n - 1] == 1 && b[n - 1] != 1) {
    for(int j = 0; j < n - 1; ++j)
      if(b[j] == 1) return copyTiled(dst, a, src, b, d, n, j, total, esize);
  }
  int64_t inner = d[n - 1], rows = total / inner;
  int64_t e = static_cast<int64_t>(esize);
  // Fewer dense rows than threads (a channel concatenation at batch 1: one
  // run per input): each row is copied in pieces of at least 64 KiB spread
  // over the threads; otherwise a piece is a whole row.
  const bool split = a[n - 1] == 1 && b[n - 1] == 1 && rows < numThreads() && inner * e >= (int64_t(1) << 17);
  const int64_t pieces = split ? std::min<int64_t>(numThreads(), inner * e >> 16) : 1;
  const int64_t per = (inner + pieces - 1) / pieces;
  parallelFor(rows * pieces, total, [&](int64_t lo, int64_t hi) {
    for(int64_t task = lo; task < hi; ++task) {
      const int64_t row = task / pieces, i0 = (task % pieces) * per, m = std::min(per, inner - i0);
      int64_t od = 0, os = 0, rem = row;
      for(int k = n - 2; k >= 0; --k) {
        int64_t idx = rem % d[k];
        rem /= d[k];
        od += idx * a[k];
        os += idx * b[k];
      }
      if(m > 0) copyRun(dst + (od + i0 * a[n - 1]) * e, a[n - 1], src + (os + i0 * b[n - 1]) * e, b[n - 1], m, esize);
    }
  });
}

}  // namespace host
}  // namespace onyx
