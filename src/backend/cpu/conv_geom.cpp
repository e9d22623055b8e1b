#include <onyx/backend/cpu/conv_geom.h>

#include <onyx/core/checked.h>

namespace onyx {
namespace host {

int64_t windowCount(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceilMode) {
  // Checked: every operand may come from a file (dims up to 2^56).
  const char* what = "window size";
  int64_t reach = addChecked(mulChecked(subChecked(k, 1, what), d, what), 1, what);
  int64_t span = subChecked(addChecked(addChecked(in, pb, what), pe, what), reach, what);
  if(span < 0) return -1;
  int64_t out = (ceilMode ? (span / s + (span % s != 0)) : span / s) + 1;
  if(ceilMode && (out - 1) * s >= in + pb) --out;
  return out;
}

ConvGeom convGeom(const Shape& img, const Shape& pos, const std::vector<int64_t>& kernel, const Spatial& sp) {
  ConvGeom g;
  const int nd = sp.nd, off = 3 - nd;
  for(int i = 0; i < nd; ++i) {
    g.img[off + i] = img.dims()[2 + i];
    g.pos[off + i] = pos.dims()[2 + i];
    g.k[off + i] = kernel[size_t(i)];
    g.s[off + i] = sp.strides[size_t(i)];
    g.d[off + i] = sp.dilations[size_t(i)];
    g.pb[off + i] = sp.pads[size_t(i)];
    g.pe[off + i] = sp.pads[size_t(nd + i)];
  }
  for(int i = 0; i < 3; ++i) {
    g.imgSize *= g.img[i];
    g.posSize *= g.pos[i];
    g.kSize *= g.k[i];
  }
  return g;
}

std::vector<int64_t> spatialDims(const Shape& s) { return std::vector<int64_t>(s.dims().begin() + 2, s.dims().end()); }

ConvDims convDims(const Shape& x, const Shape& pos, const std::vector<int64_t>& kernel, const Spatial& sp,
                  int64_t group) {
  ConvDims d;
  d.g = convGeom(x, pos, kernel, sp);
  d.N = x[0];
  d.C = x[1];
  d.M = pos[1];
  d.G = group;
  d.Cg = d.C / d.G;
  d.Mg = d.M / d.G;
  d.CK = d.Cg * d.g.kSize;
  d.P = d.g.posSize;
  d.direct = d.g.identity();
  return d;
}

PoolGeom poolGeom(const Shape& x, const Shape& y, const std::vector<int64_t>& kernel, const Spatial& sp) {
  PoolGeom p;
  p.g = convGeom(x, y, kernel, sp);
  p.planes = x[0] * x[1];
  return p;
}

}  // namespace host
}  // namespace onyx
