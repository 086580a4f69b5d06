#include "gguf_tiny_llama.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"

namespace tandem::test {
namespace {

// ggml's type ids for the dtypes the oracle files hold.
DType ggml_dtype(uint32_t id) {
  switch (id) {
    case 0:
      return DType::F32;
    case 1:
      return DType::F16;
    case 2:
      return DType::Q4_0;
    case 3:
      return DType::Q4_1;
    case 6:
      return DType::Q5_0;
    case 7:
      return DType::Q5_1;
    case 8:
      return DType::Q8_0;
    case 10:
      return DType::Q2_K;
    case 11:
      return DType::Q3_K;
    case 12:
      return DType::Q4_K;
    case 13:
      return DType::Q5_K;
    case 14:
      return DType::Q6_K;
    case 20:
      return DType::IQ4_NL;
    case 23:
      return DType::IQ4_XS;
    case 30:
      return DType::BF16;
    default:
      fail("gguf test reader: ggml type {}", id);
  }
}

class Cursor {
 public:
  explicit Cursor(const std::vector<uint8_t>& b) : b_(b) {}
  template <class T>
  T get() {
    TANDEM_CHECK(pos_ + sizeof(T) <= b_.size(), "gguf test reader: truncated at {}", pos_);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    TANDEM_CHECK(pos_ + n <= b_.size(), "gguf test reader: string past the end");
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // Skips (or reads, when numeric) one value of GGUF type `t`; arrays are skipped.
  double value(uint32_t t) {
    switch (t) {
      case 0:
        return get<uint8_t>();
      case 1:
        return get<int8_t>();
      case 2:
        return get<uint16_t>();
      case 3:
        return get<int16_t>();
      case 4:
        return get<uint32_t>();
      case 5:
        return get<int32_t>();
      case 6:
        return get<float>();
      case 7:
        return get<uint8_t>();
      case 8:
        str();
        return 0;
      case 9: {
        const uint32_t et = get<uint32_t>();
        const uint64_t n = get<uint64_t>();
        for (uint64_t i = 0; i < n; i++) value(et);
        return 0;
      }
      case 10:
        return double(get<uint64_t>());
      case 11:
        return double(get<int64_t>());
      case 12:
        return get<double>();
      default:
        fail("gguf test reader: value type {}", t);
    }
  }
  size_t pos() const { return pos_; }

 private:
  const std::vector<uint8_t>& b_;
  size_t pos_ = 0;
};

}  // namespace

GgufTestFile::GgufTestFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(bool(in), "cannot open {}", path.string());
  bytes_.assign(std::istreambuf_iterator<char>(in), {});
  Cursor c(bytes_);
  TANDEM_CHECK(c.get<uint32_t>() == 0x46554747u, "{} is not GGUF", path.string());
  c.get<uint32_t>();  // version
  const uint64_t num_tensors = c.get<uint64_t>(), num_kv = c.get<uint64_t>();
  for (uint64_t i = 0; i < num_kv; i++) {
    const std::string key = c.str();
    numbers_[key] = c.value(c.get<uint32_t>());
  }
  for (uint64_t i = 0; i < num_tensors; i++) {
    const std::string name = c.str();
    const uint32_t nd = c.get<uint32_t>();
    TANDEM_CHECK(nd >= 1 && nd <= 2, "{}: {} dims", name, nd);
    int64_t ne[2] = {1, 1};
    for (uint32_t d = 0; d < nd; d++) ne[d] = int64_t(c.get<uint64_t>());
    Info info;
    info.dtype = ggml_dtype(c.get<uint32_t>());
    info.shape = nd == 1 ? Shape{ne[0]} : Shape{ne[1], ne[0]};
    info.offset = c.get<uint64_t>();
    tensors_[name] = info;
  }
  const size_t align =
      numbers_.count("general.alignment") ? size_t(numbers_["general.alignment"]) : 32;
  data_start_ = (c.pos() + align - 1) / align * align;
}

Tensor GgufTestFile::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  TANDEM_CHECK(it != tensors_.end(), "no tensor {}", name);
  Tensor t = Tensor::empty_host(it->second.dtype, it->second.shape);
  const size_t at = data_start_ + it->second.offset;
  TANDEM_CHECK(at + t.nbytes() <= bytes_.size(), "{} past the end", name);
  std::memcpy(t.data, bytes_.data() + at, t.nbytes());
  return t;
}

double GgufTestFile::number(const std::string& key) const {
  auto it = numbers_.find(key);
  TANDEM_CHECK(it != numbers_.end(), "no key {}", key);
  return it->second;
}

namespace {

struct Dims {
  int64_t D, H, Hkv, Dh, V;
  double eps, theta;
};

// x / rms(x) · w per row.   x [T, D] (in place), w [D]
void rms_norm(std::vector<double>& x, const std::vector<float>& w, int64_t D, double eps) {
  for (size_t r = 0; r < x.size() / size_t(D); r++) {
    double ss = 0;
    for (int64_t d = 0; d < D; d++) ss += x[r * D + d] * x[r * D + d];
    const double inv = 1.0 / std::sqrt(ss / double(D) + eps);
    for (int64_t d = 0; d < D; d++) x[r * D + d] *= inv * w[size_t(d)];
  }
}

std::vector<float> host_floats(const GgufTestFile& f, const std::string& name) {
  Tensor t = f.tensor(name);
  std::vector<float> v(size_t(t.numel()));
  convert_to_f32(t.data, t.dtype, v.data(), v.size());
  return v;
}

// Adjacent pairs (2i, 2i + 1) of each head turned by pos · θ^(−2i/Dh) / freqs[i].
void rope(std::vector<double>& x, const std::vector<int32_t>& pos, int64_t heads, const Dims& d,
          const std::vector<float>& freqs) {
  for (size_t t = 0; t < pos.size(); t++)
    for (int64_t h = 0; h < heads; h++)
      for (int64_t i = 0; i < d.Dh / 2; i++) {
        const double f = freqs.empty() ? 1.0 : double(freqs[size_t(i)]);
        const double a = pos[t] * std::pow(d.theta, -2.0 * double(i) / double(d.Dh)) / f;
        double* p = &x[(t * size_t(heads) + size_t(h)) * size_t(d.Dh) + size_t(2 * i)];
        const double x0 = p[0], x1 = p[1];
        p[0] = x0 * std::cos(a) - x1 * std::sin(a);
        p[1] = x0 * std::sin(a) + x1 * std::cos(a);
      }
}

// Causal GQA softmax attention.   q [T, H, Dh], k, v [T, Hkv, Dh] -> [T, H, Dh]
std::vector<double> attention(const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, int64_t T, const Dims& d) {
  std::vector<double> out(size_t(T * d.H * d.Dh), 0.0);
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < d.H; h++) {
      const int64_t kh = h / (d.H / d.Hkv);
      std::vector<double> s(size_t(t + 1));
      double m = -1e300, z = 0;
      for (int64_t u = 0; u <= t; u++) {
        double dot = 0;
        for (int64_t i = 0; i < d.Dh; i++)
          dot += q[size_t((t * d.H + h) * d.Dh + i)] * k[size_t((u * d.Hkv + kh) * d.Dh + i)];
        s[size_t(u)] = dot / std::sqrt(double(d.Dh));
        m = std::max(m, s[size_t(u)]);
      }
      for (double& e : s) z += (e = std::exp(e - m));
      for (int64_t u = 0; u <= t; u++)
        for (int64_t i = 0; i < d.Dh; i++)
          out[size_t((t * d.H + h) * d.Dh + i)] +=
              s[size_t(u)] / z * v[size_t((u * d.Hkv + kh) * d.Dh + i)];
    }
  return out;
}

// y [T, N] = x [T, K] · Wᵀ on the backend, W uploaded as stored or as f32.
class Projector {
 public:
  Projector(Backend& be, const GgufTestFile& f, bool dequantize_first)
      : be_(be), f_(f), f32_(dequantize_first) {}

  Tensor weight(const std::string& name) const {
    Tensor w = f_.tensor(name);
    if (!f32_ || !dtype_is_block(w.dtype)) return be_.upload(w, be_.weight_dtype(w.dtype));
    Tensor wf = Tensor::empty_host(DType::F32, w.shape);
    convert_to_f32(w.data, w.dtype, wf.ptr<float>(), size_t(w.numel()));
    return be_.upload(wf, DType::F32);
  }

  std::vector<double> operator()(const std::vector<double>& x, int64_t T,
                                 const std::string& name) const {
    Linear l;
    l.weight = weight(name);
    const int64_t N = l.weight.dim(0), K = l.weight.dim(1);
    Tensor xh = Tensor::empty_host(DType::F32, {T, K});
    for (size_t i = 0; i < x.size(); i++) xh.ptr<float>()[i] = float(x[i]);
    Tensor xd = be_.upload(xh, DType::F32), out = be_.alloc(DType::F32, {T, N});
    be_.linear(out, xd, l);
    Tensor oh = be_.to_host_f32(out);
    return std::vector<double>(oh.ptr<float>(), oh.ptr<float>() + T * N);
  }

 private:
  Backend& be_;
  const GgufTestFile& f_;
  bool f32_;
};

}  // namespace

std::vector<float> tiny_llama_logits(Backend& be, const GgufTestFile& f,
                                     const std::vector<int32_t>& tokens, bool dequantize_first) {
  const Dims d{int64_t(f.number("llama.embedding_length")),
               int64_t(f.number("llama.attention.head_count")),
               int64_t(f.number("llama.attention.head_count_kv")),
               int64_t(f.number("llama.attention.key_length")),
               int64_t(f.number("llama.vocab_size")),
               f.number("llama.attention.layer_norm_rms_epsilon"),
               f.number("llama.rope.freq_base")};
  const int64_t T = int64_t(tokens.size()), layers = int64_t(f.number("llama.block_count"));
  const Projector project(be, f, dequantize_first);
  std::vector<int32_t> pos(tokens.size());
  for (size_t t = 0; t < pos.size(); t++) pos[t] = int32_t(t);
  const std::vector<float> freqs =
      f.has("rope_freqs.weight") ? host_floats(f, "rope_freqs.weight") : std::vector<float>{};

  Tensor ids =
      be.upload(Tensor::borrow(const_cast<int32_t*>(tokens.data()), DType::I32, {T}), DType::I32);
  Tensor emb = be.alloc(DType::F32, {T, d.D});
  be.embedding(emb, project.weight("token_embd.weight"), ids, 1.f);
  Tensor eh = be.to_host_f32(emb);
  std::vector<double> x(eh.ptr<float>(), eh.ptr<float>() + T * d.D);
  for (int64_t l = 0; l < layers; l++) {
    const std::string p = "blk." + std::to_string(l) + ".";
    std::vector<double> h = x;
    rms_norm(h, host_floats(f, p + "attn_norm.weight"), d.D, d.eps);
    std::vector<double> q = project(h, T, p + "attn_q.weight"),
                        k = project(h, T, p + "attn_k.weight");
    const std::vector<double> v = project(h, T, p + "attn_v.weight");
    rope(q, pos, d.H, d, freqs);
    rope(k, pos, d.Hkv, d, freqs);
    const std::vector<double> o = project(attention(q, k, v, T, d), T, p + "attn_output.weight");
    for (size_t i = 0; i < x.size(); i++) x[i] += o[i];
    h = x;
    rms_norm(h, host_floats(f, p + "ffn_norm.weight"), d.D, d.eps);
    std::vector<double> g = project(h, T, p + "ffn_gate.weight");
    const std::vector<double> u = project(h, T, p + "ffn_up.weight");
    for (size_t i = 0; i < g.size(); i++) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    const std::vector<double> down = project(g, T, p + "ffn_down.weight");
    for (size_t i = 0; i < x.size(); i++) x[i] += down[i];
  }
  rms_norm(x, host_floats(f, "output_norm.weight"), d.D, d.eps);
  const std::vector<double> logits =
      project(x, T, f.has("output.weight") ? "output.weight" : "token_embd.weight");
  return std::vector<float>(logits.begin(), logits.end());
}

}  // namespace tandem::test
