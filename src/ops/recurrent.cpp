// Recurrent: lstm_sequence, ONNX's LSTM as one kernel for inference. The
// input projection of every step and direction is one GEMM (x W^T onto rows
// of the biases); each step is then one GEMM h R^T accumulated into that
// step's rows in place (float32 at a few rows: R packed once, see
// few_rows_gemm.h), followed by the gates element by element. The hidden states
// are written straight into the output, where the next step's GEMM reads
// them, so a step allocates and copies nothing.
#include <onyx/ops/recurrent.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include <onyx/backend/cpu/few_rows_gemm.h>
#include <onyx/backend/cpu/gemm.h>
#include <onyx/backend/cpu/parallel.h>
#include <onyx/backend/cpu/vecmath.h>
#include <onyx/core/dispatch.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/onnx_export.h>

namespace onyx {

namespace {

int numDirections(const std::string& d) { return d == "bidirectional" ? 2 : 1; }

template <class T>
inline T sigmoidOf(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

// R of each direction packed for host::fewRowsGemm, kept with the node
// while R is the same constant.
struct LstmPackedR {
  const void* r = nullptr;
  std::vector<std::shared_ptr<const host::FewRowsPacked>> dirs;
};

template <class T>
void lstmKernel(KernelCtx& c) {
  const TensorBase &xt = *c.in[0], &Wt = *c.in[1], &Rt = *c.in[2], &Bt = *c.in[3], &h0t = *c.in[4], &c0t = *c.in[5];
  const T* P = c.in.size() > 6 ? c.in[6]->data<T>() : nullptr;
  const std::string& direction = c.attrs.s("direction");
  const int D = numDirections(direction);
  const T clip = static_cast<T>(c.attrs.f("clip"));
  const bool inputForget = c.attrs.i("input_forget") != 0;
  const int64_t seq = xt.shape()[0], batch = xt.shape()[1], in = xt.shape()[2], H = Rt.shape()[2], G = 4 * H;
  const T* x = xt.data<T>();
  T* y = c.out.data<T>();
  // The gate rows of every step, [seq * batch, D * G]: direction d's in
  // columns d * G to (d + 1) * G; and each direction's cell state.
  const int64_t gateRows = std::max<int64_t>(seq, 1) * batch, LG = D * G;
  Tensor gatesT = c.scratch(Shape({gateRows, LG}), c.out.type());
  Tensor cellT = c.scratch(Shape({D * batch, H}), c.out.type());
  auto clipped = [&](T v) { return clip > 0 ? std::min(std::max(v, -clip), clip) : v; };
  // Float32 steps of a few rows: R packed once (per run when R is not a
  // constant; 64 steps of a tagger amortise that too).
  std::shared_ptr<LstmPackedR> packed;
  if constexpr(std::is_same<T, float>::value) {
    if(host::fewRowsGemmTakes(batch) && seq > 0) {
      std::shared_ptr<void>& slot = c.node.kernelState();
      const bool keep = c.node.child(2)->kind() == NodeKind::Constant;
      packed = keep ? std::static_pointer_cast<LstmPackedR>(slot) : nullptr;
      if(!packed || packed->r != Rt.raw()) {
        packed = std::make_shared<LstmPackedR>();
        packed->r = Rt.raw();
        for(int d = 0; d < D; ++d) {
          const float* Rd = Rt.data<float>() + d * G * H;
          packed->dirs.push_back(keep ? host::fewRowsPackShared(Rd, H, true, H, G)
                                      : std::make_shared<const host::FewRowsPacked>(host::fewRowsPack(Rd, H, true, H, G)));
        }
        if(keep) slot = packed;
      }
    }
  }
  // Input projection of all steps and both directions, one GEMM on every
  // thread (W [D, G, in] is one [D * G, in] matrix) accumulated onto rows of
  // both biases.
  {
    T* gates = gatesT->data<T>();
    std::vector<T> bias(static_cast<size_t>(LG));
    for(int64_t d = 0; d < D; ++d)
      for(int64_t j = 0; j < G; ++j) {
        const T* B = Bt.data<T>() + d * 2 * G;
        bias[size_t(d * G + j)] = B[j] + B[G + j];
      }
    host::parallelFor(seq * batch, seq * batch * LG, [&](int64_t lo, int64_t hi) {
      for(int64_t r = lo; r < hi; ++r) std::copy(bias.begin(), bias.end(), gates + r * LG);
    });
    if(seq > 0) host::gemm<T>(false, true, seq * batch, LG, in, 1.0, x, in, Wt.data<T>(), in, 1.0, gates, LG);
  }
  // The recurrence of direction d: one small GEMM and the gate passes per step.
  auto recur = [&](int d) {
    T* gates = gatesT->data<T>() + d * G;
    T* cell = cellT->data<T>() + d * batch * H;
    const bool reverse = direction == "reverse" || d == 1;
    const T* R = Rt.data<T>() + d * G * H;
    const T* Pd = P ? P + d * 3 * H : nullptr;
    std::copy(c0t.data<T>() + d * batch * H, c0t.data<T>() + (d + 1) * batch * H, cell);
    const T* hPrev = h0t.data<T>() + d * batch * H;
    for(int64_t k = 0; k < seq; ++k) {
      const int64_t t = reverse ? seq - 1 - k : k;
      T* g = gates + t * batch * LG;
      if constexpr(std::is_same<T, float>::value) {
        if(packed) host::fewRowsGemm(batch, hPrev, H, *packed->dirs[size_t(d)], true, g, LG);
        else host::gemm<T>(false, true, batch, G, H, 1.0, hPrev, H, R, H, 1.0, g, LG);
      } else {
        host::gemm<T>(false, true, batch, G, H, 1.0, hPrev, H, R, H, 1.0, g, LG);
      }
      T* h = y + (t * D + d) * batch * H;
      if constexpr(std::is_same<T, float>::value) {
        if(!Pd && clip <= 0 && !inputForget) {
          // The common LSTM: the gates' transcendentals as vector passes over
          // each row (i, o, f contiguous, then c), in place in this step's
          // gate rows, which nothing reads afterwards.
          host::parallelFor(batch, batch * H * 16, [&](int64_t lo, int64_t hi) {
            std::vector<float> tc(static_cast<size_t>(H));
            for(int64_t b = lo; b < hi; ++b) {
              float* gb = g + b * LG;
              float* cb = cell + b * H;
              float* hb = h + b * H;
              host::vec::sigmoid(gb, gb, 3 * H);
              host::vec::tanh(gb + 3 * H, gb + 3 * H, H);
              for(int64_t j = 0; j < H; ++j) cb[j] = gb[2 * H + j] * cb[j] + gb[j] * gb[3 * H + j];
              host::vec::tanh(cb, tc.data(), H);
              for(int64_t j = 0; j < H; ++j) hb[j] = gb[H + j] * tc[static_cast<size_t>(j)];
            }
          });
          hPrev = h;
          continue;
        }
      }
      host::parallelFor(batch, batch * H * 16, [&](int64_t lo, int64_t hi) {
        for(int64_t b = lo; b < hi; ++b) {
          const T* gb = g + b * LG;
          T* cb = cell + b * H;
          T* hb = h + b * H;
          for(int64_t j = 0; j < H; ++j) {
            T cPrev = cb[j];
            T gi = gb[j], go = gb[H + j], gf = gb[2 * H + j], gc = gb[3 * H + j];
            if(Pd) {
              gi += Pd[j] * cPrev;
              gf += Pd[2 * H + j] * cPrev;
            }
            T i = sigmoidOf(clipped(gi));
            T f = inputForget ? T(1) - i : sigmoidOf(clipped(gf));
            T cn = f * cPrev + i * std::tanh(clipped(gc));
            if(Pd) go += Pd[H + j] * cn;
            T o = sigmoidOf(clipped(go));
            cb[j] = cn;
            hb[j] = o * std::tanh(cn);
          }
        }
      });
      hPrev = h;
    }
    if(c.attrs.i("cell_state") != 0) std::copy(cell, cell + batch * H, y + (seq * D + d) * batch * H);
  };
  // Two directions are independent: with two threads or more each runs
  // its steps on a thread of its own (the per-step GEMMs, a few rows each,
  // gain nothing from being split; at batch 8 two threads ran slower than
  // one). Inside the region BLAS and parallelFor run on the calling thread.
#ifdef _OPENMP
  if(D == 2 && host::numThreads() >= 2) {
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for(int d = 0; d < 2; ++d) recur(d);
    return;
  }
#endif
  for(int d = 0; d < D; ++d) recur(d);
}

}  // namespace

// Y[t, d] = o_t * tanh(c_t), c_t = f_t * c_{t-1} + i_t * tanh(x_t Wc^T + h_{t-1} Rc^T + bc), ...
ONYX_OP(kLstmSequence, "lstm_sequence")
    .doc("ONNX LSTM (default activations, layout 0) over the whole sequence in one kernel: y = Y [seq, D, batch, H], "
         "with the final cell state appended along axis 0 when cell_state = 1")
    .inputs(6, 7)
    .attr("direction", std::string("forward"))
    .attr("clip", 0.0)
    .attr("input_forget", int64_t(0))
    .attr("cell_state", int64_t(0))
    .infer([](InferCtx& c) {
      const std::string& dir = c.attrs.s("direction");
      c.check(dir == "forward" || dir == "reverse" || dir == "bidirectional", "direction '", dir,
              "' is not forward, reverse or bidirectional");
      const int64_t D = numDirections(dir);
      c.type = c.commonType();
      c.requireFloat(0);
      const Shape& xs = c.shapeOf(0);
      c.check(xs.rank() == 3, "x must have shape [seq, batch, in], got ", xs);
      const Shape& rs = c.shapeOf(2);
      c.check(rs.rank() == 3 && rs[0] == D && rs[1] == 4 * rs[2], "R must have shape [", D, ", 4H, H], got ", rs);
      const int64_t seq = xs[0], batch = xs[1], H = rs[2];
      c.check(c.shapeOf(1) == Shape({D, 4 * H, xs[2]}), "W must have shape [", D, ", ", 4 * H, ", ", xs[2], "]");
      c.check(c.shapeOf(3) == Shape({D, 8 * H}), "B must have shape [", D, ", ", 8 * H, "]");
      c.check(c.shapeOf(4) == Shape({D, batch, H}) && c.shapeOf(5) == Shape({D, batch, H}),
              "h0 and c0 must have shape [", D, ", ", batch, ", ", H, "]");
      if(c.n() > 6) c.check(c.shapeOf(6) == Shape({D, 3 * H}), "P must have shape [", D, ", ", 3 * H, "]");
      c.check(c.attrs.f("clip") >= 0, "clip must be >= 0 (0: none)");
      c.shape = Shape({seq + (c.attrs.i("cell_state") != 0 ? 1 : 0), D, batch, H});
    })
    .cpu([](KernelCtx& c) {
      Type t = c.out.type();
      if(t == Type::float32) return lstmKernel<float>(c);
      if(t == Type::float64) return lstmKernel<double>(c);
      fail("lstm_sequence: element type ", t, " is not supported (float32, float64)");
    })
    .gpuOnHost("no GPU form yet: a CPU inference kernel (issue 16); GPU graphs get it from the importer on host copies")
    .notDifferentiable("the fused inference form of ONNX LSTM; a graph built for training imports LSTM unrolled")
    // Back to one ONNX LSTM (opset 7 on: the attributes read here); with the
    // cell state, Y_c is appended to Y as the kernel does.
    .onnxExport(7, [](OnnxExportCtx& c) {
      const Shape& xs = c.inputShape(0);
      const int64_t D = c.inputShape(2)[0], H = c.inputShape(2)[2];
      OnnxAttrs attrs{{"direction", c.attrs().s("direction")}, {"hidden_size", H}};
      if(c.attrs().f("clip") > 0) attrs.push_back({"clip", c.attrs().f("clip")});
      if(c.attrs().i("input_forget") != 0) attrs.push_back({"input_forget", int64_t(1)});
      std::vector<std::string> ins{c.input(0), c.input(1), c.input(2), c.input(3), "", c.input(4), c.input(5)};
      if(c.numInputs() > 6) ins.push_back(c.input(6));
      if(c.attrs().i("cell_state") == 0) {
        c.emit("LSTM", ins, {c.output()}, attrs);
        return;
      }
      std::string y = c.fresh("y"), yh = c.fresh("y_h"), yc = c.fresh("y_c"), yc4 = c.fresh("y_c4");
      c.emit("LSTM", ins, {y, yh, yc}, attrs);
      c.emit("Reshape", {yc, c.intsConst({1, D, xs[1], H}, "cell_shape")}, {yc4});
      c.emit("Concat", {y, yc4}, {c.output()}, {{"axis", int64_t(0)}});
    });

Expr lstm_sequence(Expr x, Expr W, Expr R, Expr B, Expr h0, Expr c0, Expr P, const std::string& direction,
                   double clip, bool inputForget, bool cellState) {
  std::vector<Expr> ins{x, W, R, B, h0, c0};
  if(P) ins.push_back(P);
  return x->graph()->make(kLstmSequence, ins,
                          {{"direction", direction},
                           {"clip", clip},
                           {"input_forget", int64_t(inputForget)},
                           {"cell_state", int64_t(cellState)}});
}

}  // namespace onyx
