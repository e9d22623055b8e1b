// Cumulative ops: running sums and products along an axis (ONNX CumSum,
// CumProd), and the exact gradient of the product. Kernels run a thread per
// line of x viewed as [outer, n, inner] around the axis (movers.h's Lines),
// accumulating in AccOf<T> (double for floats, 64 bits for integers, which
// wrap back to their width on the store).
#include <onyx/ops/cumulative.h>

#include <algorithm>
#include <string>
#include <vector>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/movers.h>

namespace onyx {

namespace {

using ops::Lines;
using ops::linesAlong;

// The axis in [-rank, rank) (a rank-0 x counts as 1-D, as ONNX has it).
void inferCumAxis(InferCtx& c, const Shape& s) { c.axis(c.attrs.i("axis"), std::max(1, s.rank())); }

// y[.., i, ..] = sum (product) of x[.., j, ..] for j <= i, j < i with
// exclusive, from the end with reverse.
void cumulate(KernelCtx& c, bool product) {
  const TensorBase& x = *c.in[0];
  const Lines ln = linesAlong(x.shape(), c.attrs.i("axis"));
  bool exclusive = c.attrs.i("exclusive") != 0, reverse = c.attrs.i("reverse") != 0;
  dispatchNumeric(x.type(), c.node.type().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = host::AccOf<T>;
    const T* xp = x.data<T>();
    T* yp = c.out.data<T>();
    host::parallelFor(ln.count(), x.size(), [&](int64_t lo, int64_t hi) {
      for(int64_t r = lo; r < hi; ++r) {
        const int64_t base = ln.start(r);
        A acc = A(product ? 1 : 0);
        for(int64_t s = 0; s < ln.n; ++s) {
          const int64_t o = base + (reverse ? ln.n - 1 - s : s) * ln.inner;
          A v = static_cast<A>(host::load(xp, o));
          if(exclusive) host::store(yp, o, acc);
          // Integers wrap around, as numpy's cumsum and cumprod do (a
          // signed overflow would be undefined behaviour).
          acc = product ? functional::wrapMul(acc, v) : functional::wrapAdd(acc, v);
          if(!exclusive) host::store(yp, o, acc);
        }
      }
    });
  });
}

}  // namespace

// ---------------------------------------------------------------- cumsum

// y[.., i, ..] = sum_{j <= i} x[.., j, ..] (variants: exclusive, reverse)
ONYX_OP(kCumSum, "cumsum")
    .doc("y[.., i, ..] = sum of x[.., j, ..] for j <= i along axis (j < i if exclusive; j >= i / j > i if reverse)")
    .inputs(1)
    .attr("axis", int64_t(0))
    .attr("exclusive", int64_t(0))
    .attr("reverse", int64_t(0))
    .infer([](InferCtx& c) {
      const Shape& s = c.shapeOf(0);
      c.check(isComputeType(c.typeOf(0)) && c.typeOf(0) != Type::boolean, "element type ", c.typeOf(0),
              " is not numeric; cast x to a float or integer type");
      inferCumAxis(c, s);
      c.shape = s;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) { cumulate(c, false); })
    // dx_j = sum of dy_i over the i whose sums include j: the same sum in the
    // other direction.
    .backward([](GradCtx& g) {
      g.add(0, cumsum(g.dy, static_cast<int>(g.attrs.i("axis")), g.attrs.i("exclusive") != 0,
                      g.attrs.i("reverse") == 0));
    })
    .onnx("CumSum", 11)
    .importer([](OnnxImportCtx& c) {
      std::vector<int64_t> axis = c.ints(1);
      c.check(axis.size() == 1, "axis (input 1) must hold one value, got ", axis.size());
      c.setOutput(0, cumsum(c.input(0), static_cast<int>(axis[0]), c.attrInt("exclusive", 0) != 0,
                            c.attrInt("reverse", 0) != 0));
    })
    // The mirror: axis as input 1 (a 0-D int64). CumSum lacks 8- and 16-bit
    // integers, and float16 / bfloat16 before opset 14: integers are summed
    // in 64 bits and wrapped back to their width (as the kernel's store
    // does), float16 / bfloat16 in float64 (the kernel's accumulator) and
    // cast back.
    .exporter([](OnnxExportCtx& c) {
      Attrs a = c.attrs();
      Type t = c.inputType(0);
      OnnxAttrs at;
      if(a.i("exclusive")) at.push_back({"exclusive", int64_t(1)});
      if(a.i("reverse")) at.push_back({"reverse", int64_t(1)});
      bool isSigned = t == Type::int8 || t == Type::int16;
      bool small = isSigned || t == Type::uint8 || t == Type::uint16;
      bool half = (t == Type::float16 || t == Type::bfloat16) && c.opset() < 14;
      if(t == Type::bfloat16 && c.opset() < 13) c.requireOpset(14, "element type bfloat16");
      std::string p = small ? (isSigned ? "i64/" : "u64/") : half ? "f64/" : "";
      auto axis = [&] {
        return c.constant(TensorBase::fromVector(Shape{}, std::vector<int64_t>{a.i("axis")}), p + "axis");
      };
      if(!small && !half) return c.emit("CumSum", {c.input(0), axis()}, {c.output()}, at);
      Type via = half ? Type::float64 : isSigned ? Type::int64 : Type::uint64;
      // Wrapping to the width: ((y + h) mod 2^bits) - h, h = 2^(bits-1) for
      // signed types (0 for unsigned ones), in the 64-bit type. Its constants
      // come before the axis: a re-import holds them as graph constants,
      // which export ahead of what the CumSum node's export adds.
      int bits = typeBits(t);
      int64_t h = isSigned ? int64_t(1) << (bits - 1) : 0;
      std::string hc, mc;
      if(small) {
        if(h) hc = c.scalarConst(static_cast<double>(h), via, p + "half");
        mc = c.scalarConst(static_cast<double>(int64_t(1) << bits), via, p + "modulus");
      }
      std::string x = c.emitCast(c.input(0), via, p + "x");
      std::string y = c.fresh(p.substr(0, 3));
      c.emit("CumSum", {x, axis()}, {y}, at);
      if(small) {
        std::string v = y;
        if(h) {
          v = c.fresh(p + "shifted");
          c.emit("Add", {y, hc}, {v});
        }
        std::string m = c.fresh(p + "wrapped");
        c.emit("Mod", {v, mc}, {m});
        y = m;
        if(h) {
          y = c.fresh(p + "unshifted");
          c.emit("Sub", {m, hc}, {y});
        }
      }
      c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(t)}});
    });

Expr cumsum(Expr x, int axis, bool exclusive, bool reverse) {
  return x->graph()->make(kCumSum, {x},
                          {{"axis", attr(axis)}, {"exclusive", attr(exclusive)}, {"reverse", attr(reverse)}});
}

// ---------------------------------------------------------------- cumprod

// With a_s the elements of a line in the order of the products (reversed for
// reverse) and g_s the output gradient, dx_j = P_j * z_j where P_j = prod_{u<j} a_u
// and z_j = sum_{s>=j} g_s prod_{j<u<=s} a_u (inclusive: z_j = g_j + a_{j+1} z_{j+1})
// or z_j = sum_{s>j} g_s prod_{j<u<s} a_u (exclusive: z_j = g_{j+1} + a_{j+1} z_{j+1}).
// No division, so zeros in x are exact.
ONYX_OP(kCumProdGrad, "cumprod_grad")
    .doc("dx = gradient of sum(cumprod(x, axis, exclusive, reverse) * dy) w.r.t. x (inputs x, dy)")
    .inputs(2)
    .attr("axis", int64_t(0))
    .attr("exclusive", int64_t(0))
    .attr("reverse", int64_t(0))
    .infer([](InferCtx& c) {
      c.requireFloat(0);
      c.check(c.shapeOf(0) == c.shapeOf(1), "x and dy must have one shape");
      Type t = c.commonType();
      inferCumAxis(c, c.shapeOf(0));
      c.shape = c.shapeOf(0);
      c.type = t;
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      const TensorBase& dy = *c.in[1];
      const Lines ln = linesAlong(x.shape(), c.attrs.i("axis"));
      bool exclusive = c.attrs.i("exclusive") != 0, reverse = c.attrs.i("reverse") != 0;
      dispatchFloat(x.type(), "cumprod_grad", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* xp = x.data<T>();
        const T* gp = dy.data<T>();
        T* op = c.out.data<T>();
        host::parallelFor(ln.count(), x.size() * 2, [&](int64_t lo, int64_t hi) {
          const int64_t n = ln.n;
          std::vector<double> z(static_cast<size_t>(n));
          for(int64_t r = lo; r < hi; ++r) {
            const int64_t base = ln.start(r);
            auto at = [&](int64_t s) { return base + (reverse ? n - 1 - s : s) * ln.inner; };
            double next = 0;  // z_{j+1}
            for(int64_t j = n - 1; j >= 0; --j) {
              double zj;
              if(j == n - 1) zj = exclusive ? 0.0 : double(host::load(gp, at(j)));
              else if(exclusive) zj = double(host::load(gp, at(j + 1))) + double(host::load(xp, at(j + 1))) * next;
              else zj = double(host::load(gp, at(j))) + double(host::load(xp, at(j + 1))) * next;
              z[static_cast<size_t>(j)] = zj;
              next = zj;
            }
            double p = 1;
            for(int64_t j = 0; j < n; ++j) {
              host::store(op, at(j), p * z[static_cast<size_t>(j)]);
              p *= double(host::load(xp, at(j)));
            }
          }
        });
      });
    })
    .notDifferentiable("the gradient of cumprod; second derivatives of cumprod are not supported")
    .noOnnx("internal: the backward of cumprod");

// y[.., i, ..] = prod_{j <= i} x[.., j, ..] (variants: exclusive, reverse)
ONYX_OP(kCumProd, "cumprod")
    .doc("y[.., i, ..] = product of x[.., j, ..] for j <= i along axis (j < i if exclusive; j >= i / j > i if "
         "reverse)")
    .inputs(1)
    .attr("axis", int64_t(0))
    .attr("exclusive", int64_t(0))
    .attr("reverse", int64_t(0))
    .infer([](InferCtx& c) {
      c.check(isComputeType(c.typeOf(0)) && c.typeOf(0) != Type::boolean, "element type ", c.typeOf(0),
              " is not numeric; cast x to a float or integer type");
      inferCumAxis(c, c.shapeOf(0));
      c.shape = c.shapeOf(0);
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) { cumulate(c, true); })
    .backward([](GradCtx& g) {
      g.add(0, g.graph.make(kCumProdGrad, {g.x(0), g.dy},
                            {{"axis", g.attrs.i("axis")},
                             {"exclusive", g.attrs.i("exclusive")},
                             {"reverse", g.attrs.i("reverse")}}));
    })
    .onnx("CumProd", 26)
    .importer([](OnnxImportCtx& c) {
      std::vector<int64_t> axis = c.ints(1);
      c.check(axis.size() == 1, "axis (input 1) must hold one value, got ", axis.size());
      Expr x = c.input(0);
      c.axis(axis[0], std::max(1, x->shape().rank()));  // a rank-0 x counts as 1-D
      c.setOutput(0, cumprod(x, static_cast<int>(axis[0]), c.attrInt("exclusive", 0) != 0,
                             c.attrInt("reverse", 0) != 0));
    })
    // axis is an input; types: float ones and 32/64-bit integers. Narrower
    // integer products wrap in the kernel but would saturate in a Cast back
    // from a wider type, so they have no exact form.
    .exporter([](OnnxExportCtx& c) {
      const Type t = c.inputType(0);
      c.check(isFloat(t) || t == Type::int32 || t == Type::int64 || t == Type::uint32 || t == Type::uint64,
              "CumProd takes float, int32/int64 and uint32/uint64 elements, not ", t);
      OnnxAttrs at;
      if(c.attrs().i("exclusive") != 0) at.emplace_back("exclusive", int64_t(1));
      if(c.attrs().i("reverse") != 0) at.emplace_back("reverse", int64_t(1));
      c.emit("CumProd", {c.input(0), c.scalarConst(double(c.attrs().i("axis")), Type::int64, "axis")}, {c.output()},
             at);
    });

Expr cumprod(Expr x, int axis, bool exclusive, bool reverse) {
  return x->graph()->make(kCumProd, {x},
                          {{"axis", attr(axis)}, {"exclusive", attr(exclusive)}, {"reverse", attr(reverse)}});
}

}  // namespace onyx
