// Signal processing (src/ops/signal.cpp): discrete Fourier transforms, the
// short-time Fourier transform, window functions and the mel filter bank.
//
// Complex values use ONNX's layout: a trailing dim of 2 holds (real, imag);
// a trailing dim of 1 is a real signal. The transforms are matrix products
// with a constant DFT matrix (O(n^2) per transformed line, built in double),
// so they are differentiable in the signal (and STFT's window) for free.
// Windows and the mel matrix depend on sizes only: they are constants.
#pragma once
#include <cstdint>

#include <onyx/core/types.h>
#include <onyx/graph/node.h>

namespace onyx {

class ExpressionGraph;

// ONNX DFT on x [.., n (at axis), .., c], c = 1 (real) or 2 (complex).
// axis may not be the last dim; negative counts from the end. length is the
// transform length L (0: n, or 2 (n - 1) for an inverse one-sided transform);
// the signal is cut or zero-padded to L.
//   forward:  X[k] = sum_j x[j] e^(-2 pi i j k / L), [.., L or L/2+1 (onesided), .., 2]
//   inverse:  x[j] = 1/L sum_k X[k] e^(2 pi i j k / L), [.., L, .., 2]
//   inverse and onesided: the real signal of length L whose spectrum's first
//     L/2+1 bins are given (numpy irfft), [.., L, .., 1]
Expr dft(Expr x, int axis, int64_t length = 0, bool inverse = false, bool onesided = false);

// ONNX STFT: signal [batch, samples, c], frames of frameLength samples every
// frameStep samples (1 + (samples - frameLength) / frameStep of them), each
// multiplied by `window` ([frameLength], or null: none) and transformed.
// frameLength 0 means the window's length. Result [batch, frames, bins, 2]
// with bins frameLength / 2 + 1 when onesided, else frameLength.
Expr stft(Expr signal, int64_t frameStep, Expr window = nullptr, int64_t frameLength = 0, bool onesided = true);

// Windows w[n], n = 0..size-1, with N = size (periodic) or size - 1
// (symmetric); a window of size 1 is [1]:
//   hann:     sin^2(pi n / N)
//   hamming:  25/46 - 21/46 cos(2 pi n / N)
//   blackman: 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)
Expr hann_window(ExpressionGraph& graph, int64_t size, bool periodic = true, Type type = Type::float32);
Expr hamming_window(ExpressionGraph& graph, int64_t size, bool periodic = true, Type type = Type::float32);
Expr blackman_window(ExpressionGraph& graph, int64_t size, bool periodic = true, Type type = Type::float32);

// ONNX MelWeightMatrix: [dftLength / 2 + 1, numMelBins] triangular filters
// spaced evenly on the mel scale (mel = 2595 log10(1 + hz / 700)) between
// lowerHz and upperHz.
Expr mel_weight_matrix(ExpressionGraph& graph, int64_t numMelBins, int64_t dftLength, int64_t sampleRate,
                       double lowerHz, double upperHz, Type type = Type::float32);

}  // namespace onyx
