// Signal processing: DFT, STFT, windows, mel filter bank. No registry ops of
// its own: a DFT is a matmul with a constant [n*c, bins*2] DFT matrix built
// in double (O(n^2) per line, fine for the frame sizes of audio front ends;
// an FFT kernel would pay off for long transforms), STFT gathers frames and
// calls it, and windows / the mel matrix depend on sizes only, so they are
// constants. Gradients come from matmul, gather and mul. The ONNX imports
// (DFT, STFT, the windows, MelWeightMatrix) are in converters/import_signal.cpp.
#include <onyx/ops/signal.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <onyx/core/allocation_limit.h>
#include <onyx/core/checked.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/node_initializers.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/layout.h>
#include <onyx/ops/linalg.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

constexpr double kPi = 3.14159265358979323846;

// cos/sin of 2 pi j k / L with j k reduced mod L first (exact argument).
void twiddle(int64_t j, int64_t k, int64_t L, double& c, double& s) {
  double t = 2 * kPi * double((j % L) * (k % L) % L) / double(L);
  c = std::cos(t);
  s = std::sin(t);
}

// The DFT matrix mapping the n*c values of one line (interleaved re/im when
// c == 2) to bins*2 values (or L real values for the inverse one-sided case).
std::vector<double> dftMatrix(int64_t n, int64_t c, int64_t L, bool inverse, bool onesided, int64_t& cols) {
  const bool irfft = inverse && onesided;
  const int64_t bins = irfft ? L : (onesided ? L / 2 + 1 : L);
  // L comes from the file (dft_length): the matrix is checked before it is
  // made (a length of 2^53 once asked for 2^59 bytes).
  cols = irfft ? L : mulChecked(bins, 2, "dft: the output's values per line");
  const int64_t elements = mulChecked(mulChecked(n, c, "dft: the input's values per line"), cols, "dft: the DFT matrix");
  checkHostAllocation(size_t(mulChecked(elements, int64_t(sizeof(double)), "dft: the DFT matrix's bytes")),
                      "dft: the DFT matrix");
  std::vector<double> W(size_t(elements), 0.0);
  auto at = [&](int64_t row, int64_t col) -> double& { return W[size_t(row * cols + col)]; };
  for(int64_t j = 0; j < n; ++j) {
    if(irfft) {
      // x[m] = 1/L sum_{k <= L/2} w_k (Re X_k cos - Im X_k sin), w_k = 2 except
      // at k = 0 and k = L/2 (sin vanishes there, so their imaginary parts drop).
      if(j > L / 2) continue;
      double wk = (j == 0 || 2 * j == L) ? 1.0 : 2.0;
      for(int64_t m = 0; m < L; ++m) {
        double co, si;
        twiddle(j, m, L, co, si);
        at(j * c, m) = wk * co / double(L);
        if(c == 2) at(j * c + 1, m) = -wk * si / double(L);
      }
      continue;
    }
    if(j >= L) continue;  // the signal is cut to L samples
    for(int64_t k = 0; k < bins; ++k) {
      double co, si;
      twiddle(j, k, L, co, si);
      if(!inverse) {
        // (a + ib)(cos - i sin) = (a cos + b sin) + i (b cos - a sin)
        at(j * c, 2 * k) = co;
        at(j * c, 2 * k + 1) = -si;
        if(c == 2) {
          at(j * c + 1, 2 * k) = si;
          at(j * c + 1, 2 * k + 1) = co;
        }
      } else {
        // (a + ib)(cos + i sin) / L = (a cos - b sin + i (a sin + b cos)) / L
        at(j * c, 2 * k) = co / double(L);
        at(j * c, 2 * k + 1) = si / double(L);
        if(c == 2) {
          at(j * c + 1, 2 * k) = -si / double(L);
          at(j * c + 1, 2 * k + 1) = co / double(L);
        }
      }
    }
  }
  return W;
}

// w[n] = f(n, N) with N = size (periodic) or size - 1; size 1 gives [1].
template <class F>
Expr windowConstant(ExpressionGraph& graph, const char* what, int64_t size, bool periodic, Type type, F f) {
  ONYX_CHECK(size >= 0, what, ": size must be >= 0, got ", size);
  ONYX_CHECK(isComputeType(type) && type != Type::boolean, what, ": output type ", type, " is not a numeric type");
  const Shape shape{size};  // checked: at most 2^56 elements
  checkHostAllocation(static_cast<size_t>(size) * sizeof(double), "the window's values");
  std::vector<double> v(static_cast<size_t>(size));
  const double N = double(periodic ? size : size - 1);
  for(int64_t i = 0; i < size; ++i) v[size_t(i)] = size == 1 ? 1.0 : f(double(i), N);
  return graph.constant(shape, inits::fromVector(v), type);
}

}  // namespace

// ------------------------------------------------------------------------ dft

Expr dft(Expr x, int axis, int64_t length, bool inverse, bool onesided) {
  const Shape& s = x->shape();
  const int r = s.rank();
  ONYX_CHECK(isFloat(x->value_type()), "dft: x has element type ", x->value_type(), "; it must be a float type");
  ONYX_CHECK(r >= 2, "dft: x of shape ", s, " needs rank >= 2 ([.., n, .., c] with c = 1 or 2)");
  const int64_t c = s[r - 1];
  ONYX_CHECK(c == 1 || c == 2, "dft: the last dim of x (shape ", s, ") must be 1 (real) or 2 (complex), got ", c);
  const int a = normalizeAxis(axis, r, "dft: axis");
  ONYX_CHECK(a != r - 1, "dft: axis ", axis, " is the trailing (real, imag) dim of x (shape ", s, ")");
  const int64_t n = s[a];
  const int64_t L = length > 0 ? length : (inverse && onesided ? 2 * (n - 1) : n);
  ONYX_CHECK(length >= 0, "dft: length must be >= 0 (0: the axis' size), got ", length);
  ONYX_CHECK(L >= 1, "dft: the transform length is ", L, " (axis ", a, " of x of shape ", s, ")");
  // Move the transformed axis next to the (re, im) dim and merge the two.
  std::vector<int> perm;
  for(int i = 0; i < r - 1; ++i)
    if(i != a) perm.push_back(i);
  perm.push_back(a);
  perm.push_back(r - 1);
  const bool moved = a != r - 2;
  Expr xt = moved ? transpose(x, perm) : x;
  std::vector<int64_t> flat = xt->shape().vec();
  flat.pop_back();
  flat.back() = n * c;
  int64_t cols = 0;
  std::vector<double> W = dftMatrix(n, c, L, inverse, onesided, cols);
  Expr Wc = x->graph()->constant(Shape{n * c, cols}, inits::fromVector(W), x->value_type());
  Expr y = matmul(reshape(xt, flat), Wc);
  const bool irfft = inverse && onesided;
  std::vector<int64_t> out = flat;
  out.back() = irfft ? L : cols / 2;
  out.push_back(irfft ? 1 : 2);
  y = reshape(y, out);
  if(!moved) return y;
  std::vector<int> inv(perm.size());
  for(size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int(i);
  return transpose(y, inv);
}

// ----------------------------------------------------------------------- stft

Expr stft(Expr signal, int64_t frameStep, Expr window, int64_t frameLength, bool onesided) {
  const Shape& s = signal->shape();
  ONYX_CHECK(s.rank() == 3 && (s[2] == 1 || s[2] == 2), "stft: signal must have shape [batch, samples, 1 or 2], got ",
             s);
  ONYX_CHECK(frameStep >= 1, "stft: frame_step must be >= 1, got ", frameStep);
  if(window) {
    ONYX_CHECK(window->shape().rank() == 1, "stft: window must be 1-D, got shape ", window->shape());
    if(frameLength == 0) frameLength = window->shape()[0];
    ONYX_CHECK(window->shape()[0] == frameLength, "stft: window of length ", window->shape()[0],
               " does not match frame_length ", frameLength);
  }
  if(frameLength == 0) frameLength = s[1];
  ONYX_CHECK(frameLength >= 1 && frameLength <= s[1], "stft: frame_length ", frameLength,
             " must be in [1, samples = ", s[1], "]");
  const int64_t frames = 1 + (s[1] - frameLength) / frameStep;
  std::vector<int64_t> idx(size_t(frames * frameLength));
  for(int64_t f = 0; f < frames; ++f)
    for(int64_t j = 0; j < frameLength; ++j) idx[size_t(f * frameLength + j)] = f * frameStep + j;
  Expr ids = signal->graph()->constant(Shape{frames, frameLength}, inits::fromVector(idx), Type::int64);
  Expr x = gather(signal, 1, ids);  // [batch, frames, frameLength, c]
  if(window) x = x * reshape(cast(window, signal->value_type()), std::vector<int64_t>{1, 1, frameLength, 1});
  return dft(x, 2, frameLength, false, onesided);
}

// -------------------------------------------------------------------- windows

Expr hann_window(ExpressionGraph& graph, int64_t size, bool periodic, Type type) {
  return windowConstant(graph, "hann_window", size, periodic, type, [](double i, double N) {
    double s = std::sin(kPi * i / N);
    return s * s;
  });
}

Expr hamming_window(ExpressionGraph& graph, int64_t size, bool periodic, Type type) {
  return windowConstant(graph, "hamming_window", size, periodic, type, [](double i, double N) {
    const double alpha = 25.0 / 46.0;
    return alpha - (1 - alpha) * std::cos(2 * kPi * i / N);
  });
}

Expr blackman_window(ExpressionGraph& graph, int64_t size, bool periodic, Type type) {
  return windowConstant(graph, "blackman_window", size, periodic, type, [](double i, double N) {
    return 0.42 - 0.5 * std::cos(2 * kPi * i / N) + 0.08 * std::cos(4 * kPi * i / N);
  });
}

// --------------------------------------------------------- mel weight matrix

Expr mel_weight_matrix(ExpressionGraph& graph, int64_t numMelBins, int64_t dftLength, int64_t sampleRate,
                       double lowerHz, double upperHz, Type type) {
  ONYX_CHECK(numMelBins >= 1 && dftLength >= 1 && sampleRate >= 1, "mel_weight_matrix: num_mel_bins (", numMelBins,
             "), dft_length (", dftLength, ") and sample_rate (", sampleRate, ") must be >= 1");
  ONYX_CHECK(lowerHz >= 0 && lowerHz < upperHz, "mel_weight_matrix: need 0 <= lower_edge_hertz (", lowerHz,
             ") < upper_edge_hertz (", upperHz, ")");
  ONYX_CHECK(isComputeType(type) && type != Type::boolean, "mel_weight_matrix: output type ", type,
             " is not a numeric type");
  const int64_t bins = dftLength / 2 + 1;
  // The output's size, checked (at most 2^56 elements) before anything of it
  // is allocated; its float64 values are held to the run's memory limit.
  const Shape outShape{bins, numMelBins};
  checkHostAllocation(static_cast<size_t>(outShape.elements()) * sizeof(double), "mel_weight_matrix's values");
  auto toMel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double lo = toMel(lowerHz), hi = toMel(upperHz);
  const double step = (hi - lo) / double(numMelBins + 2);
  // Edges of the triangles as spectrogram bin indices.
  std::vector<int64_t> edge(size_t(numMelBins + 2));
  for(int64_t i = 0; i < numMelBins + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (double(i) * step + lo) / 2595) - 1);
    edge[size_t(i)] = static_cast<int64_t>(std::floor(double(dftLength + 1) * hz / double(sampleRate)));
    ONYX_CHECK(edge[size_t(i)] >= 0 && edge[size_t(i)] < bins, "mel_weight_matrix: upper_edge_hertz ", upperHz,
               " maps past the last of the ", bins, " spectrogram bins (sample_rate ", sampleRate, ")");
  }
  std::vector<double> w(size_t(bins * numMelBins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& { return w[size_t(j * numMelBins + i)]; };
  for(int64_t i = 0; i < numMelBins; ++i) {
    const int64_t l = edge[size_t(i)], m = edge[size_t(i + 1)], h = edge[size_t(i + 2)];
    if(m == l) at(m, i) = 1;
    else
      for(int64_t j = l; j <= m; ++j) at(j, i) = double(j - l) / double(m - l);
    for(int64_t j = m; j < h; ++j) at(j, i) = double(h - j) / double(h - m);
  }
  return graph.constant(outShape, inits::fromVector(w), type);
}

}  // namespace onyx
