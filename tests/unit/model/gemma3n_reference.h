// A naive Gemma 3n forward in double, written straight from transformers' 5.17
// modeling_gemma3n.py (Gemma3nTextModel.forward, Gemma3nTextDecoderLayer.forward), one
// token at a time with plain loops: the reference the model tests compare against where
// the oracle fixture cannot reach (its correct_output_scale is zero, so per-layer inputs
// never show; it has one active index, four streams, a full per-layer vocabulary).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace tandem::test {

using Vec = std::vector<double>;

struct RefConfig {
  int V, Vp, D, L, Hq, Hkv, Dh, P, N, active, rank, window;
  std::vector<int> ffn;          // [L]
  std::vector<bool> sliding;     // [L]
  std::vector<int> kv_source;    // [L], -1 = own
  std::vector<bool> sparse;      // [L]: activation sparsity on the layer's MLP
  std::vector<double> std_mult;  // [L]: Φ⁻¹(sparsity) where sparse
  double theta_full, theta_sliding, softcap, eps;
};

struct RefWeights {
  std::map<std::string, std::vector<float>> w;  // HF names
  const std::vector<float>& at(const std::string& name) const { return w.at(name); }
  bool has(const std::string& name) const { return w.count(name) != 0; }
};

class Gemma3nReference {
 public:
  Gemma3nReference(RefConfig c, const RefWeights& w) : c_(std::move(c)), w_(w) {}

  // Logits of every position: [T][V].
  std::vector<Vec> forward(const std::vector<int>& tokens) const {
    const int T = int(tokens.size());
    std::vector<std::vector<Vec>> h(size_t(c_.N), std::vector<Vec>(size_t(T)));
    std::vector<std::vector<Vec>> pli(static_cast<size_t>(T));
    for (int t = 0; t < T; t++) {
      Vec x0 = row("model.embed_tokens.weight", tokens[t], c_.D, std::sqrt(double(c_.D)));
      pli[t] = per_layer_inputs(x0, tokens[t]);
      h[0][t] = x0;
      for (int n = 1; n < c_.N; n++)
        h[n][t] =
            match(lin("model.altup_projections." + std::to_string(n - 1) + ".weight", x0), x0);
    }
    kv_.assign(size_t(c_.L), {});
    for (int i = 0; i < c_.L; i++) layer(i, h, pli);
    std::vector<Vec> logits;
    for (int t = 0; t < T; t++) logits.push_back(head(h, t));
    return logits;
  }

 private:
  struct Kv {
    std::vector<Vec> k, v;  // [T][Hkv·Dh]
  };

  static std::string L(int i) { return "model.layers." + std::to_string(i) + "."; }

  Vec row(const std::string& name, int r, int width, double scale) const {
    const auto& t = w_.at(name);
    Vec out(static_cast<size_t>(width));
    for (int c = 0; c < width; c++) out[c] = t[r * width + c] * scale;
    return out;
  }
  // W x (+ b), W [out, in] from the tensor's size.
  Vec lin(const std::string& name, const Vec& x, const std::string& bias = "") const {
    const auto& W = w_.at(name);
    const size_t in = x.size(), out = W.size() / in;
    Vec y(out, 0.0);
    for (size_t o = 0; o < out; o++) {
      for (size_t k = 0; k < in; k++) y[o] += double(W[o * in + k]) * x[k];
      if (!bias.empty() && w_.has(bias)) y[o] += w_.at(bias)[o];
    }
    return y;
  }
  static double mean_sq(const Vec& x) {
    double s = 0;
    for (double v : x) s += v * v;
    return s / double(x.size());
  }
  // Gemma3nRMSNorm: x · (mean(x²) + eps)^-½ · w (w absent = with_scale False).
  Vec rms(const Vec& x, const std::string& w = "") const {
    Vec y = x;
    const double r = 1.0 / std::sqrt(mean_sq(x) + c_.eps);
    for (size_t i = 0; i < y.size(); i++) y[i] *= r * (w.empty() ? 1.0 : double(w_.at(w)[i]));
    return y;
  }
  static Vec add(Vec a, const Vec& b, double scale = 1.0) {
    for (size_t i = 0; i < a.size(); i++) a[i] = (a[i] + b[i]) * scale;
    return a;
  }
  static double gelu(double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  // x rescaled to the RMS of ref, mean square floored at 1e-5.
  static Vec match(Vec x, const Vec& ref) {
    const double s = std::sqrt(mean_sq(ref)) / std::sqrt(std::max(mean_sq(x), 1e-5));
    for (double& v : x) v *= s;
    return x;
  }

  std::vector<Vec> per_layer_inputs(const Vec& x0, int token) const {
    Vec proj = lin("model.per_layer_model_projection.weight", x0);
    Vec emb = row("model.embed_tokens_per_layer.weight", token < c_.Vp ? token : 0, c_.L * c_.P,
                  std::sqrt(double(c_.P)));
    std::vector<Vec> out;
    for (int l = 0; l < c_.L; l++) {
      Vec p(proj.begin() + l * c_.P, proj.begin() + (l + 1) * c_.P);
      for (double& v : p) v /= std::sqrt(double(c_.D));
      p = rms(p, "model.per_layer_projection_norm.weight");
      Vec e(emb.begin() + l * c_.P, emb.begin() + (l + 1) * c_.P);
      out.push_back(add(p, e, 1 / std::sqrt(2.0)));
    }
    return out;
  }

  Vec modalities(int i, const Vec& x) const {
    Vec r = rms(x, L(i) + "altup.router_norm.weight");
    for (double& v : r) v /= c_.D;
    Vec m = lin(L(i) + "altup.modality_router.weight", r);
    for (double& v : m) v = std::tanh(v);
    return m;
  }

  void rope(double* x, int pos, bool sliding) const {
    const int half = c_.Dh / 2;
    const double theta = sliding ? c_.theta_sliding : c_.theta_full;
    for (int j = 0; j < half; j++) {
      const double a = pos * std::pow(theta, -2.0 * j / c_.Dh);
      const double x1 = x[j], x2 = x[j + half];
      x[j] = x1 * std::cos(a) - x2 * std::sin(a);
      x[j + half] = x2 * std::cos(a) + x1 * std::sin(a);
    }
  }
  // Per-head norm (optionally weighted) then optionally RoPE.
  Vec heads(Vec x, const std::string& norm, int pos, bool sliding, bool rotate) const {
    for (size_t h = 0; h < x.size() / size_t(c_.Dh); h++) {
      Vec one(x.begin() + long(h) * c_.Dh, x.begin() + long(h + 1) * c_.Dh);
      one = rms(one, norm);
      if (rotate) rope(one.data(), pos, sliding);
      std::copy(one.begin(), one.end(), x.begin() + long(h) * c_.Dh);
    }
    return x;
  }

  std::vector<Vec> attention(int i, const std::vector<Vec>& x) const {
    const std::string A = L(i) + "self_attn.";
    const bool sl = c_.sliding[i];
    const int T = int(x.size());
    if (c_.kv_source[i] < 0)
      for (int t = 0; t < T; t++) {
        kv_[i].k.push_back(heads(lin(A + "k_proj.weight", x[t], A + "k_proj.bias"),
                                 A + "k_norm.weight", t, sl, true));
        kv_[i].v.push_back(
            heads(lin(A + "v_proj.weight", x[t], A + "v_proj.bias"), "", t, sl, false));
      }
    const Kv& kv = kv_[c_.kv_source[size_t(i)] < 0 ? i : c_.kv_source[size_t(i)]];
    std::vector<Vec> out;
    for (int t = 0; t < T; t++) {
      Vec q = heads(lin(A + "q_proj.weight", x[t], A + "q_proj.bias"), A + "q_norm.weight", t, sl,
                    true);
      Vec o(size_t(c_.Hq * c_.Dh), 0.0);
      for (int h = 0; h < c_.Hq; h++) {
        const int g = h / (c_.Hq / c_.Hkv);
        std::vector<double> s;
        int first = sl ? std::max(0, t - c_.window + 1) : 0;
        for (int j = first; j <= t; j++) {
          double d = 0;  // scaling 1.0
          for (int e = 0; e < c_.Dh; e++) d += q[h * c_.Dh + e] * kv.k[j][g * c_.Dh + e];
          s.push_back(d);
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double z = 0;
        for (double& v : s) z += (v = std::exp(v - mx));
        for (int j = first; j <= t; j++)
          for (int e = 0; e < c_.Dh; e++)
            o[h * c_.Dh + e] += s[j - first] / z * kv.v[j][g * c_.Dh + e];
      }
      out.push_back(lin(A + "o_proj.weight", o, A + "o_proj.bias"));
    }
    return out;
  }

  Vec mlp(int i, const Vec& x) const {
    Vec g = lin(L(i) + "mlp.gate_proj.weight", x), u = lin(L(i) + "mlp.up_proj.weight", x);
    if (c_.sparse[i]) {
      double mean = 0, var = 0;
      for (double v : g) mean += v;
      mean /= double(g.size());
      for (double v : g) var += (v - mean) * (v - mean);
      const double cutoff = mean + std::sqrt(var / double(g.size())) * c_.std_mult[i];
      for (double& v : g) v = std::max(v - cutoff, 0.0);
    }
    for (size_t k = 0; k < g.size(); k++) g[k] = gelu(g[k]) * u[k];
    return lin(L(i) + "mlp.down_proj.weight", g);
  }

  void layer(int i, std::vector<std::vector<Vec>>& h,
             const std::vector<std::vector<Vec>>& pli) const {
    const int T = int(h[0].size()), N = c_.N, a = c_.active;
    std::vector<std::vector<Vec>> pred = h;
    std::vector<Vec> normed(static_cast<size_t>(T));
    for (int t = 0; t < T; t++) {
      Vec coefs = lin(L(i) + "altup.prediction_coefs.weight", modalities(i, h[a][t]));
      for (int m = 0; m < N; m++)
        for (int s = 0; s < N; s++)
          for (int d = 0; d < c_.D; d++) pred[m][t][d] += coefs[m * N + s] * h[s][t][d];
      normed[t] = rms(pred[a][t], L(i) + "input_layernorm.weight");
    }
    std::vector<Vec> attn = attention(i, normed);
    for (int t = 0; t < T; t++) {
      const Vec& active = pred[a][t];
      Vec laurel = lin(L(i) + "laurel.linear_right.weight",
                       lin(L(i) + "laurel.linear_left.weight", normed[t]));
      laurel = add(normed[t], rms(laurel, L(i) + "laurel.post_laurel_norm.weight"));
      Vec x = add(add(active, rms(attn[t], L(i) + "post_attention_layernorm.weight")), laurel,
                  1 / std::sqrt(2.0));
      Vec activated = add(x, rms(mlp(i, rms(x, L(i) + "pre_feedforward_layernorm.weight")),
                                 L(i) + "post_feedforward_layernorm.weight"));
      Vec c = lin(L(i) + "altup.correction_coefs.weight", modalities(i, activated));
      for (int m = 0; m < N; m++)
        for (int d = 0; d < c_.D; d++)
          h[m][t][d] = pred[m][t][d] + (c[m] + 1) * (activated[d] - active[d]);
      Vec first = h[a][t];
      for (int d = 0; d < c_.D; d++) first[d] *= w_.at(L(i) + "altup.correct_output_scale")[d];
      Vec g = lin(L(i) + "per_layer_input_gate.weight", first);
      for (int p = 0; p < c_.P; p++) g[p] = gelu(g[p]) * pli[t][i][p];
      Vec u = rms(lin(L(i) + "per_layer_projection.weight", g),
                  L(i) + "post_per_layer_input_norm.weight");
      for (int m = 1; m < N; m++) h[m][t] = add(h[m][t], u);
    }
  }

  Vec head(const std::vector<std::vector<Vec>>& h, int t) const {
    Vec sum = h[0][t];
    for (int n = 1; n < c_.N; n++)
      sum =
          add(sum, match(lin("model.altup_unembed_projections." + std::to_string(n - 1) + ".weight",
                             h[n][t]),
                         h[0][t]));
    for (double& v : sum) v /= c_.N;
    Vec logits = lin("lm_head.weight", rms(sum, "model.norm.weight"));
    for (double& v : logits) v = c_.softcap * std::tanh(v / c_.softcap);
    return logits;
  }

  RefConfig c_;
  const RefWeights& w_;
  mutable std::vector<Kv> kv_;
};

}  // namespace tandem::test
