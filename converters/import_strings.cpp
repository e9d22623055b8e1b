// String ops of ONNX (StringNormalizer, StringConcat, StringSplit,
// RegexFullMatch) and TfIdfVectorizer. Strings never need gradients, so each
// import computes its result now from the input data (c.value) and emits it
// as a constant: the graph built is valid for those input values only, and a
// session rebuilds it per run (as for any value-dependent import).
//
// Case changes (StringNormalizer) cover ASCII letters only: other UTF-8
// characters pass through unchanged, and the `locale` attribute is read but
// not used.
//
// RegexFullMatch uses std::regex with ECMAScript syntax instead of RE2. The
// common subset (literals, classes, \d \w \s \b, groups, alternation,
// repetition, anchors) behaves the same. Known gaps against RE2: inline flags
// such as (?i) and (?s), named groups (?P<name>...), Unicode classes \pL /
// \p{Greek}, \A and \z, POSIX classes outside brackets; \w, \d and \b are
// ASCII-only, and matching works on bytes, so '.' matches one byte of a
// multi-byte UTF-8 character. A pattern std::regex rejects is an import error.
#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/core/allocation_limit.h>
#include <onyx/core/checked.h>
#include <onyx/graph/expression_graph.h>

namespace onyx {

namespace {

Tensor stringTensor(const Shape& shape, std::vector<std::string> v) {
  Tensor t = TensorBase::create(shape, Type::string);
  ONYX_ASSERT(static_cast<int64_t>(v.size()) == shape.elements(), "string tensor of shape ", shape, " from ",
              v.size(), " strings");
  t->strings() = std::move(v);
  return t;
}

// Input i's data, which must be a string tensor.
Tensor stringInput(OnnxImportCtx& c, size_t i) {
  Tensor t = c.value(i);
  c.check(t->type() == Type::string, "input ", i, " has element type ", t->type(), "; it must be string");
  return t;
}

std::string asciiLower(std::string s) {
  for(auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}
std::string asciiUpper(std::string s) {
  for(auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// Flat index into a tensor of `shape` (right-aligned in `out`) for the
// row-major output position k: numpy broadcasting.
int64_t broadcastIndex(const Shape& out, const Shape& shape, int64_t k) {
  int64_t off = 0, stride = 1;
  int offset = out.rank() - shape.rank();
  for(int i = out.rank() - 1; i >= 0; --i) {
    int64_t dout = out.dims()[static_cast<size_t>(i)];
    int64_t idx = k % dout;
    k /= dout;
    int j = i - offset;
    if(j < 0) continue;
    int64_t d = shape.dims()[static_cast<size_t>(j)];
    if(d != 1) off += idx * stride;
    stride *= d;
  }
  return off;
}

bool isSpace(char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; }

// Python's str.split(): on runs of whitespace without empty pieces when the
// delimiter is empty, else on every occurrence of the delimiter; at most
// maxsplit splits (negative: no limit), the rest stays in the last piece.
std::vector<std::string> splitString(const std::string& s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string> parts;
  if(delim.empty()) {
    size_t i = 0, n = s.size();
    while(true) {
      while(i < n && isSpace(s[i])) ++i;
      if(i >= n) break;
      if(maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = n;
        while(end > i && isSpace(s[end - 1])) --end;
        parts.push_back(s.substr(i, end - i));
        break;
      }
      size_t j = i;
      while(j < n && !isSpace(s[j])) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t start = 0;
  while(true) {
    if(maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
    size_t p = s.find(delim, start);
    if(p == std::string::npos) break;
    parts.push_back(s.substr(start, p - start));
    start = p + delim.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

}  // namespace

// ONNX StringNormalizer: drops the stopwords from a [C] or [1, C] string
// tensor (compared exactly, or ASCII case-insensitively when
// is_case_sensitive is 0), then changes case (LOWER, UPPER or NONE). When
// everything is dropped the result is one empty string ([1] or [1, 1]).
ONYX_ONNX_IMPORT(kOnnxStringNormalizer, "StringNormalizer", 10).importer([](OnnxImportCtx& c) {
  Tensor x = stringInput(c, 0);
  std::string action = c.attrString("case_change_action", "NONE");
  bool caseSensitive = c.attrInt("is_case_sensitive", 0) != 0;
  std::vector<std::string> stop = c.attrStrings("stopwords");
  c.attrString("locale", "");  // ASCII case rules whatever the locale
  c.check(action == "NONE" || action == "LOWER" || action == "UPPER",
          "case_change_action must be NONE, LOWER or UPPER, got '", action, "'");
  const Shape& s = x->shape();
  c.check(s.rank() == 1 || (s.rank() == 2 && s[0] == 1), "input has shape ", s, "; it must be [C] or [1, C]");
  std::set<std::string> stopSet;
  for(auto& w : stop) stopSet.insert(caseSensitive ? w : asciiLower(w));
  std::vector<std::string> out;
  for(const auto& w : x->strings()) {
    if(stopSet.count(caseSensitive ? w : asciiLower(w))) continue;
    out.push_back(action == "LOWER" ? asciiLower(w) : action == "UPPER" ? asciiUpper(w) : w);
  }
  if(out.empty()) out.push_back("");
  int64_t n = static_cast<int64_t>(out.size());
  Shape ys = s.rank() == 1 ? Shape{n} : Shape{1, n};
  c.setOutput(0, c.constant(stringTensor(ys, std::move(out))));
});

// ONNX StringConcat: x + y element-wise with broadcasting.
ONYX_ONNX_IMPORT(kOnnxStringConcat, "StringConcat", 20).importer([](OnnxImportCtx& c) {
  Tensor a = stringInput(c, 0), b = stringInput(c, 1);
  c.check(Shape::broadcastable(a->shape(), b->shape()), "inputs of shapes ", a->shape(), " and ", b->shape(),
          " do not broadcast");
  Shape s = Shape::broadcast({a->shape(), b->shape()});
  std::vector<std::string> out(static_cast<size_t>(s.elements()));
  const auto& sa = a->strings();
  const auto& sb = b->strings();
  for(int64_t k = 0; k < s.elements(); ++k)
    out[static_cast<size_t>(k)] = sa[static_cast<size_t>(broadcastIndex(s, a->shape(), k))] +
                                  sb[static_cast<size_t>(broadcastIndex(s, b->shape(), k))];
  c.setOutput(0, c.constant(stringTensor(s, std::move(out))));
});

// ONNX StringSplit: each string split as Python's str.split(delimiter,
// maxsplit) (an empty or absent delimiter splits on whitespace runs). The
// substrings have shape x.shape + [most pieces], padded with empty strings;
// the lengths (int64, x's shape) count each element's pieces.
ONYX_ONNX_IMPORT(kOnnxStringSplit, "StringSplit", 20).importer([](OnnxImportCtx& c) {
  Tensor x = stringInput(c, 0);
  std::string delim = c.attrString("delimiter", "");
  int64_t maxsplit = c.hasAttr("maxsplit") ? c.attrInt("maxsplit") : -1;
  c.check(!c.hasAttr("maxsplit") || maxsplit >= 0, "maxsplit must not be negative, got ", maxsplit);
  std::vector<std::vector<std::string>> pieces;
  size_t most = 0;
  for(const auto& s : x->strings()) {
    pieces.push_back(splitString(s, delim, maxsplit));
    most = std::max(most, pieces.back().size());
  }
  std::vector<int64_t> dims = x->shape().vec();
  std::vector<int64_t> lengths;
  std::vector<std::string> out;
  out.reserve(pieces.size() * most);
  for(auto& p : pieces) {
    lengths.push_back(static_cast<int64_t>(p.size()));
    for(size_t j = 0; j < most; ++j) out.push_back(j < p.size() ? std::move(p[j]) : std::string());
  }
  Shape ls(dims);
  dims.push_back(static_cast<int64_t>(most));
  c.setOutput(0, c.constant(stringTensor(Shape(dims), std::move(out))));
  if(c.numOutputs() > 1 && c.wantsOutput(1)) c.setOutput(1, c.constant(TensorBase::fromVector(ls, lengths)));
});

// ONNX RegexFullMatch: bool, whether the whole string matches `pattern`
// (std::regex ECMAScript; see the gaps against RE2 at the top of the file).
ONYX_ONNX_IMPORT(kOnnxRegexFullMatch, "RegexFullMatch", 20).importer([](OnnxImportCtx& c) {
  Tensor x = stringInput(c, 0);
  std::string pattern = c.attrString("pattern");
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript);
  } catch(const std::regex_error& e) {
    c.fail("pattern '", pattern, "' is not a valid ECMAScript regular expression (", e.what(), ")");
  }
  Tensor y = TensorBase::create(x->shape(), Type::boolean);
  bool* py = y->data<bool>();
  const auto& sx = x->strings();
  for(size_t i = 0; i < sx.size(); ++i) py[i] = std::regex_match(sx[i], re);
  c.setOutput(0, c.constant(y));
});

// ------------------------------------------------------------ TfIdfVectorizer

// ONNX TfIdfVectorizer on int32/int64/string data of shape [C] or [N, C]:
// counts, per row, the n-grams of the pool (n in [min_gram_length,
// max_gram_length], elements of an n-gram up to max_skip_count apart, one
// count per (start, skip) pair; unigrams counted once) into the output
// positions ngram_indexes gives them; mode TF keeps the counts, IDF gives
// weights[k] where the count is nonzero, TFIDF count * weights[k] (weights
// default to 1). Output float32 [max index + 1] or [N, max index + 1].
ONYX_ONNX_IMPORT(kOnnxTfIdf, "TfIdfVectorizer", 9).importer([](OnnxImportCtx& c) {
  Tensor x = c.value(0);
  int64_t minN = c.attrInt("min_gram_length"), maxN = c.attrInt("max_gram_length");
  int64_t maxSkip = c.attrInt("max_skip_count");
  std::string mode = c.attrString("mode");
  std::vector<int64_t> counts = c.attrInts("ngram_counts");
  std::vector<int64_t> indexes = c.attrInts("ngram_indexes");
  std::vector<int64_t> poolInts = c.attrInts("pool_int64s");
  std::vector<std::string> poolStrings = c.attrStrings("pool_strings");
  std::vector<double> weights = c.attrFloats("weights");
  c.check(mode == "TF" || mode == "IDF" || mode == "TFIDF", "mode must be TF, IDF or TFIDF, got '", mode, "'");
  c.check(minN >= 1 && maxN >= minN, "gram lengths must satisfy 1 <= min_gram_length <= max_gram_length, got ", minN,
          " and ", maxN);
  c.check(maxSkip >= 0, "max_skip_count must not be negative, got ", maxSkip);
  c.check(static_cast<int64_t>(counts.size()) >= maxN, "ngram_counts has ", counts.size(),
          " entries; it needs one per n-gram length up to max_gram_length ", maxN);
  bool strings = x->type() == Type::string;
  c.check(strings || x->type() == Type::int32 || x->type() == Type::int64, "input has element type ", x->type(),
          "; it must be int32, int64 or string");
  c.check(strings ? poolInts.empty() : poolStrings.empty(), strings ? "string input needs pool_strings"
                                                                    : "integer input needs pool_int64s");
  // Tokens as ids: integers as they are, strings by their pool position
  // (strings outside the pool get ids that match nothing).
  std::vector<int64_t> pool = poolInts;
  std::map<std::string, int64_t> strId;
  if(strings) {
    for(auto& s : poolStrings) strId.emplace(s, static_cast<int64_t>(strId.size()));
    for(auto& s : poolStrings) pool.push_back(strId[s]);
  }
  const int64_t poolSize = static_cast<int64_t>(pool.size());
  // Pool n-grams of each length: map from token tuple to the ordinal.
  std::map<std::vector<int64_t>, int64_t> grams;
  int64_t ordinal = 0;
  for(int64_t n = 1; n <= static_cast<int64_t>(counts.size()); ++n) {
    int64_t begin = counts[static_cast<size_t>(n - 1)];
    int64_t end = n < static_cast<int64_t>(counts.size()) ? counts[static_cast<size_t>(n)] : poolSize;
    c.check(begin >= 0 && begin <= end && end <= poolSize && (end - begin) % n == 0, "ngram_counts ",
            "entry ", n - 1, " (", begin, ") does not delimit whole ", n, "-grams in a pool of ", poolSize);
    for(int64_t p = begin; p < end; p += n, ++ordinal)
      grams.emplace(std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n), ordinal);
  }
  c.check(static_cast<int64_t>(indexes.size()) == ordinal, "ngram_indexes has ", indexes.size(),
          " entries but the pool holds ", ordinal, " n-grams");
  c.check(weights.empty() || weights.size() == indexes.size(), "weights has ", weights.size(),
          " entries; it needs one per n-gram (", indexes.size(), ")");
  int64_t width = 0;
  for(auto i : indexes) {
    c.check(i >= 0 && i < kMaxTensorElements, "ngram_indexes has an entry out of range: ", i);
    width = std::max(width, i + 1);
  }
  const Shape& s = x->shape();
  c.check(s.rank() == 1 || s.rank() == 2, "input has shape ", s, "; it must be [C] or [N, C]");
  int64_t rows = s.rank() == 2 ? s[0] : 1, cols = s[-1];
  std::vector<int64_t> tok(static_cast<size_t>(x->size()));
  for(int64_t i = 0; i < x->size(); ++i) {
    if(strings) {
      auto it = strId.find(x->strings()[static_cast<size_t>(i)]);
      tok[static_cast<size_t>(i)] = it == strId.end() ? -1 - i : it->second;
    } else {
      tok[static_cast<size_t>(i)] = x->get<int64_t>(i);
    }
  }
  // The counts and weights are host vectors: held to the run's memory limit.
  const int64_t outElems = mulChecked(rows, width, "TfIdfVectorizer output size");
  const int64_t outBytes = mulChecked(outElems, int64_t(sizeof(double)), "TfIdfVectorizer output bytes");
  checkHostAllocation(static_cast<size_t>(outBytes), "TfIdfVectorizer's counts");
  std::vector<double> cnt(static_cast<size_t>(outElems), 0.0);
  std::vector<int64_t> key;
  for(int64_t r = 0; r < rows; ++r) {
    const int64_t* row = tok.data() + r * cols;
    double* out = cnt.data() + r * width;
    for(int64_t n = minN; n <= maxN; ++n) {
      for(int64_t skip = 0; skip <= (n == 1 ? 0 : maxSkip); ++skip) {
        // Once an n-gram spans the row, larger skips find none (max_skip_count
        // may be 2^62).
        int64_t span;
        if(__builtin_mul_overflow(n - 1, skip + 1, &span) || (n > 1 && span >= cols)) break;
        for(int64_t start = 0; start + span < cols; ++start) {
          key.clear();
          for(int64_t j = 0; j < n; ++j) key.push_back(row[start + j * (skip + 1)]);
          auto it = grams.find(key);
          if(it != grams.end()) out[indexes[static_cast<size_t>(it->second)]] += 1;
        }
      }
    }
  }
  // Weights by output position.
  std::vector<double> w(static_cast<size_t>(width), 1.0);
  if(!weights.empty())
    for(size_t k = 0; k < indexes.size(); ++k) w[static_cast<size_t>(indexes[k])] = weights[k];
  for(size_t k = 0; k < cnt.size(); ++k) {
    double wk = w[k % static_cast<size_t>(width)];
    if(mode == "IDF") cnt[k] = cnt[k] > 0 ? wk : 0;
    else if(mode == "TFIDF") cnt[k] *= wk;
  }
  Shape ys = s.rank() == 2 ? Shape{rows, width} : Shape{width};
  c.setOutput(0, c.constant(TensorBase::fromVector(ys, std::vector<float>(cnt.begin(), cnt.end()))));
});

}  // namespace onyx
