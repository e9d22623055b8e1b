// Shape manipulation: reshape, expand, ...
#include <onyx/ops/shape.h>

#include <cstring>

#include <onyx/ops/kernel_helpers.h>

namespace onyx {

using namespace functional;

namespace {
// Plain copy of all elements (any type).
void copyKernel(KernelCtx& c) { std::memcpy(c.out.raw(), c.in[0]->raw(), c.out.bytes()); }
}  // namespace

// y = x with a new shape (one dim may be -1)
ONYX_OP(kReshape, "reshape")
    .doc("y = x viewed with a new shape (one dim may be -1)")
    .inputs(1)
    .attr("shape", IntList{})
    .infer([](InferCtx& c) {
      const IntList& s = c.attrs.ints("shape");
      Shape::Dims d(s.begin(), s.end());
      int64_t known = 1;
      int infer = -1;
      for(size_t i = 0; i < d.size(); ++i) {
        if(d[i] == -1) {
          c.check(infer < 0, "shape ", attrToString(s), " has more than one -1");
          infer = static_cast<int>(i);
        } else {
          c.check(d[i] >= 0, "shape ", attrToString(s), " has a negative dimension");
          known *= d[i];
        }
      }
      int64_t n = c.shapeOf(0).elements();
      if(infer >= 0) {
        c.check(known > 0 && n % known == 0, "cannot reshape ", c.shapeOf(0), " (", n, " elements) to ",
                attrToString(s));
        d[infer] = n / known;
      }
      c.shape = Shape(d);
      c.check(c.shape.elements() == n, "cannot reshape ", c.shapeOf(0), " (", n, " elements) to ", c.shape, " (",
              c.shape.elements(), " elements)");
      c.type = c.typeOf(0);
    })
    .cpu(copyKernel)
    .backward([](GradCtx& g) { g.add(0, reshape(g.dy, g.x(0)->shape())); })
    .onnx("Reshape", 5);

Expr reshape(Expr x, const Shape& shape) {
  if(x->shape() == shape) return x;
  return x->graph()->make(kReshape, {x}, {{"shape", attr(shape.vec())}});
}
Expr reshape(Expr x, const std::vector<int64_t>& shape) {
  return x->graph()->make(kReshape, {x}, {{"shape", attr(shape)}});
}

// y = x broadcast to `shape`
ONYX_OP(kExpand, "expand")
    .doc("y = x broadcast to shape (numpy rules; result is the broadcast of both)")
    .inputs(1)
    .attr("shape", IntList{})
    .infer([](InferCtx& c) {
      const IntList& s = c.attrs.ints("shape");
      Shape target{Shape::Dims(s.begin(), s.end())};
      try {
        c.shape = Shape::broadcast({c.shapeOf(0), target});
      } catch(const Error& e) {
        c.fail(e.what());
      }
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      dispatchAll(c.out.type(), "expand", [&](auto tag) {
        using T = typename decltype(tag)::type;
        host::elementwise<T, T>(_2, c.out, *c.in[0]);
      });
    })
    .backward([](GradCtx& g) { g.add(0, g.dy); })
    .onnx("Expand", 8);

Expr expand(Expr x, const Shape& shape) {
  if(x->shape() == shape) return x;
  return x->graph()->make(kExpand, {x}, {{"shape", attr(shape.vec())}});
}

}  // namespace onyx
