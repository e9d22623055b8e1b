#include <onyx/train/losses.h>

#include <onyx/core/error.h>
#include <onyx/core/types.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/nn.h>
#include <onyx/ops/reduce.h>

namespace onyx {

namespace {

void checkExpr(const char* loss, const char* what, const Expr& e) {
  ONYX_CHECK(e && e.valid(), loss, " loss: the ", what, " is a null or stale expression");
}

// pred and target: same graph, a float type each, equal types and shapes.
void checkPair(const char* loss, const char* predName, Expr pred, Expr target) {
  checkExpr(loss, predName, pred);
  checkExpr(loss, "target", target);
  ONYX_CHECK(pred->graph() == target->graph(), loss, " loss: ", predName, " and target belong to different graphs");
  ONYX_CHECK(isFloat(pred->value_type()), loss, " loss: ", predName, " must be a float tensor, got ",
             pred->value_type());
  ONYX_CHECK(pred->value_type() == target->value_type(), loss, " loss: ", predName, " is ", pred->value_type(),
             " but target is ", target->value_type(), "; cast the target to the ", predName, "'s type");
  ONYX_CHECK(pred->shape() == target->shape(), loss, " loss: ", predName, " ", pred->shape(), " and target ",
             target->shape(), " differ");
}

}  // namespace

Expr mseLoss(Expr pred, Expr target) {
  checkPair("mse", "prediction", pred, target);
  Expr d = pred - target;
  return mean(d * d);
}

Expr l1Loss(Expr pred, Expr target) {
  checkPair("l1", "prediction", pred, target);
  return mean(abs(pred - target));
}

Expr bceLoss(Expr probs, Expr target) {
  checkPair("bce", "probabilities", probs, target);
  Expr logP = maximum(log(probs), -100.0);
  Expr log1mP = maximum(log(1.0 - probs), -100.0);
  return -mean(target * logP + (1.0 - target) * log1mP);
}

Expr bceWithLogitsLoss(Expr logits, Expr target) {
  checkPair("bce-with-logits", "logits", logits, target);
  // -(t log s(x) + (1 - t) log(1 - s(x))) = softplus(x) - t x.
  return mean(softplus(logits) - target * logits);
}

Expr crossEntropyLoss(Expr logits, Expr labels, int classAxis) {
  checkExpr("cross-entropy", "logits", logits);
  checkExpr("cross-entropy", "labels", labels);
  ONYX_CHECK(logits->graph() == labels->graph(), "cross-entropy loss: logits and labels belong to different graphs");
  ONYX_CHECK(isFloat(logits->value_type()), "cross-entropy loss: logits must be a float tensor, got ",
             logits->value_type());
  ONYX_CHECK(labels->value_type() == Type::int64 || labels->value_type() == Type::int32,
             "cross-entropy loss: labels must be int64 (or int32) class indices, got ", labels->value_type());
  const Shape& ls = logits->shape();
  const int r = ls.rank();
  ONYX_CHECK(r >= 1, "cross-entropy loss: logits ", ls, " have no class axis; the output must be at least rank 1");
  ONYX_CHECK(classAxis >= -r && classAxis < r, "cross-entropy loss: class axis ", classAxis,
             " is out of range for logits ", ls, " (valid: ", -r, "..", r - 1, ")");
  const int axis = ls.axis(classAxis);
  ONYX_CHECK(ls[axis] >= 1, "cross-entropy loss: logits ", ls, " have no classes along axis ", axis);
  std::vector<int64_t> want;
  for(int i = 0; i < r; ++i)
    if(i != axis) want.push_back(ls[i]);
  Shape expected(want);
  ONYX_CHECK(labels->shape() == expected, "cross-entropy loss: labels ", labels->shape(), " do not match logits ", ls,
             " without the class axis ", axis, " (expected labels ", expected, ")");
  return mean(cross_entropy(logits, labels, 0.f, axis));
}

void checkLabels(const TensorBase& labels, int64_t classes) {
  ONYX_CHECK(classes > 0, "checkLabels: the number of classes must be positive, got ", classes);
  ONYX_CHECK(isInt(labels.type()), "checkLabels: labels must be an integer tensor, got ", labels.type());
  const Shape& s = labels.shape();
  for(int64_t i = 0; i < labels.size(); ++i) {
    double v = labels.getAsDouble(i);
    if(v >= 0 && v < static_cast<double>(classes)) continue;
    std::string pos;
    if(s.rank() > 1) {  // the position as well as the flat index
      std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
      int64_t rest = i;
      for(int d = s.rank() - 1; d >= 0; --d) {
        idx[static_cast<size_t>(d)] = rest % s[d];
        rest /= s[d];
      }
      pos = " (position [";
      for(size_t d = 0; d < idx.size(); ++d) pos += (d ? ", " : "") + std::to_string(idx[d]);
      pos += "])";
    }
    fail("label ", static_cast<int64_t>(v), " at index ", i, pos, " is out of range for ", classes,
         " classes; labels must be in [0, ", classes, ")");
  }
}

}  // namespace onyx
