// Reductions over any set of axes, with keepdims.
#include <onyx/ops/reduce.h>

#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/shape.h>

namespace onyx {

namespace {

// Normalised, sorted, unique axes (empty attr = all axes).
std::vector<int> reduceAxes(const Shape& s, const IntList& axes) {
  std::vector<int> r;
  if(axes.empty())
    for(int i = 0; i < s.rank(); ++i) r.push_back(i);
  for(auto a : axes) r.push_back(s.axis(a));
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

// Input shape with reduced axes set to 1.
Shape keptShape(const Shape& s, const std::vector<int>& axes) {
  Shape k = s;
  for(int a : axes) k.set(a, 1);
  return k;
}

void inferReduce(InferCtx& c) {
  std::vector<int> axes;
  try {
    axes = reduceAxes(c.shapeOf(0), c.attrs.ints("axes"));
  } catch(const Error& e) {
    c.fail(e.what());
  }
  Shape k = keptShape(c.shapeOf(0), axes);
  if(c.attrs.i("keepdims")) {
    c.shape = k;
  } else {
    Shape::Dims d;
    for(int i = 0; i < k.rank(); ++i)
      if(!std::binary_search(axes.begin(), axes.end(), i)) d.push_back(k.dims()[i]);
    c.shape = Shape(d);
  }
  c.type = c.typeOf(0);
}

// Tensor view of `out` with the input's rank (reduced axes as 1).
Tensor keptView(KernelCtx& c) {
  auto axes = reduceAxes(c.in[0]->shape(), c.attrs.ints("axes"));
  return c.out.reshaped(keptShape(c.in[0]->shape(), axes));
}

// The incoming gradient broadcast back to the input's shape.
Expr expandGrad(GradCtx& g) {
  auto axes = reduceAxes(g.x(0)->shape(), g.attrs.ints("axes"));
  Expr d = reshape(g.dy, keptShape(g.x(0)->shape(), axes));
  return expand(d, g.x(0)->shape());
}

}  // namespace

// y = sum of x over `axes`
ONYX_OP(kSum, "sum")
    .doc("y = sum of x over axes (all if empty)")
    .inputs(1)
    .attr("axes", IntList{})
    .attr("keepdims", int64_t(1))
    .infer(inferReduce)
    .cpu([](KernelCtx& c) {
      Tensor out = keptView(c);
      dispatchNumeric(c.out.type(), "sum", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = host::AccOf<T>;
        host::reduceInto<T, A>(*c.in[0], *out, A(0), [](A a, A b) { return a + b; }, [](A a, int64_t) { return a; });
      });
    })
    .backward([](GradCtx& g) { g.add(0, expandGrad(g)); })
    .onnx("ReduceSum", 1);

Expr sum(Expr x, const std::vector<int>& axes, bool keepdims) {
  return x->graph()->make(kSum, {x}, {{"axes", attr(axes)}, {"keepdims", attr(keepdims)}});
}
Expr sum(Expr x, int axis) { return sum(x, std::vector<int>{axis}, true); }
Expr sum(Expr x) { return sum(x, std::vector<int>{}, false); }

}  // namespace onyx
