// Uses the installed library through find_package(flashbuf): one small attention on the CPU,
// checked against a direct computation (one query row, so softmax is easy to write here).
#include <cmath>
#include <cstdio>
#include <vector>

#include "flashbuf/flashbuf.hpp"

int main() {
  const int sk = 5, d = 8;
  std::vector<float> q(d), k(sk * d), v(sk * d), o(d, -1.0f);
  for (int i = 0; i < d; ++i) q[i] = 0.1f * (i + 1);
  for (int i = 0; i < sk * d; ++i) {
    k[i] = std::sin(0.3f * i);
    v[i] = std::cos(0.2f * i);
  }
  flashbuf::AttentionArgs args;
  args.q = flashbuf::make_view(q.data(), flashbuf::DType::fp32, {1, 1, 1, d});
  args.k = flashbuf::make_view(k.data(), flashbuf::DType::fp32, {1, sk, 1, d});
  args.v = flashbuf::make_view(v.data(), flashbuf::DType::fp32, {1, sk, 1, d});
  args.o = flashbuf::make_view(o.data(), flashbuf::DType::fp32, {1, 1, 1, d});
  flashbuf::attention(args);
  double w[sk], total = 0, mx = -1e30;
  for (int j = 0; j < sk; ++j) {
    double s = 0;
    for (int i = 0; i < d; ++i) s += q[i] * k[j * d + i];
    w[j] = s / std::sqrt(double(d));
    mx = std::fmax(mx, w[j]);
  }
  for (int j = 0; j < sk; ++j) total += (w[j] = std::exp(w[j] - mx));
  for (int i = 0; i < d; ++i) {
    double ref = 0;
    for (int j = 0; j < sk; ++j) ref += w[j] / total * v[j * d + i];
    if (std::fabs(ref - o[i]) > 1e-5) {
      std::printf("consumer: mismatch at %d: %f vs %f\n", i, o[i], ref);
      return 1;
    }
  }
  std::printf("consumer: ok (%s)\n", flashbuf::build_info().c_str());
  return 0;
}
