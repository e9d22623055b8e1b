// Losses for training (src/train/losses.cpp). Each returns a rank-0 Expr, the
// mean over all elements (cross-entropy: over all label positions), built
// from registry ops so that backward() and gradients() differentiate it.
// Shapes are checked when the loss is built: a mismatch is an onyx::Error
// naming the loss and both shapes (no broadcasting between prediction and
// target).
#pragma once
#include <cstdint>

#include <onyx/core/tensor.h>
#include <onyx/graph/node.h>

namespace onyx {

// mean((pred - target)^2). pred: a float type; target: same shape and type.
Expr mseLoss(Expr pred, Expr target);
// mean(|pred - target|). The gradient at pred == target is 0.
Expr l1Loss(Expr pred, Expr target);
// Binary cross-entropy on probabilities in [0, 1]:
// -mean(t log p + (1 - t) log(1 - p)), each log clamped below at -100 (as
// PyTorch's BCELoss) so that p = 0 or 1 gives a finite loss.
Expr bceLoss(Expr probs, Expr target);
// Binary cross-entropy on logits: mean(softplus(x) - t x), which equals
// bceLoss(sigmoid(x), t) but stays exact for large |x|.
Expr bceWithLogitsLoss(Expr logits, Expr target);
// mean over the label positions of -log_softmax(logits)[label] along
// `classAxis` (negative counts from the end). labels: int32 or int64 class
// indices with logits' shape minus the class axis. Labels outside
// [0, classes) are an onyx::Error when the graph runs (checkLabels checks a
// host tensor before that).
Expr crossEntropyLoss(Expr logits, Expr labels, int classAxis = -1);

// Throws onyx::Error "label 7 at index 3 is out of range for 5 classes" for
// the first label outside [0, classes); the labels must be an integer tensor
// on the host.
void checkLabels(const TensorBase& labels, int64_t classes);

}  // namespace onyx
