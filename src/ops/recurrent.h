// Recurrent layers as one op each, for inference: the whole sequence runs in
// one kernel, a GEMM per step on buffers allocated once. A graph built for
// training imports ONNX's recurrent ops unrolled into differentiable
// building blocks instead (converters/import_recurrent.cpp).
#pragma once
#include <string>

#include <onyx/graph/node.h>

namespace onyx {

// ONNX LSTM with its default activations (sigmoid, tanh, tanh), in ONNX's
// layout 0: x [seq, batch, in]; per direction D (numDir of them) W [D, 4H,
// in], R [D, 4H, H], B [D, 8H], h0 and c0 [D, batch, H], P [D, 3H] or null
// (peepholes); gates in ONNX's order i, o, f, c. direction is "forward",
// "reverse" or "bidirectional"; clip 0 means no clipping. Returns Y [seq, D,
// batch, H]; with cellState, [seq + 1, D, batch, H]: Y and then the final
// cell state. Not differentiable.
Expr lstm_sequence(Expr x, Expr W, Expr R, Expr B, Expr h0, Expr c0, Expr P, const std::string& direction,
                   double clip = 0, bool inputForget = false, bool cellState = false);

}  // namespace onyx
