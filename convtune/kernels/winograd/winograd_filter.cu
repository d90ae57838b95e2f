// Winograd filter transform U = G g Gᵀ for F(m×m, 3×3), the filter operand of both Winograd paths.
//
// w (K, C, 3, 3) fp32 -> U (α², Cp, Kp) fp32, U[ξ·α + ν][c][k] = (G g_kc Gᵀ)[ξ][ν], zero for c ≥ C or k ≥ K.
// One thread per (c, k) of the padded Cp × Kp plane, k fastest, so the α² stores of a warp are coalesced.
// The products and sums run in double and round to float once (what the float64 host transform gave);
// G (α × 3) comes from the launcher's generated wrapper (transforms.py's exact fractions as doubles).

namespace convtune {

template <int A>
__device__ __forceinline__ void winograd_filter_body(const float* __restrict__ w, float* __restrict__ U, int C,
                                                     int K, int Cp, int Kp, const double (&G)[A][3]) {
  const long long plane = static_cast<long long>(Cp) * Kp;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= plane) return;
  const int c = static_cast<int>(i / Kp), k = static_cast<int>(i % Kp);
  const bool live = c < C && k < K;
  double g[3][3];
#pragma unroll
  for (int r = 0; r < 3; ++r) {
#pragma unroll
    for (int s = 0; s < 3; ++s) {
      g[r][s] = live ? static_cast<double>(w[(static_cast<size_t>(k) * C + c) * 9 + r * 3 + s]) : 0.0;
    }
  }
  double t[A][3];  // t = G g
#pragma unroll
  for (int a = 0; a < A; ++a) {
#pragma unroll
    for (int s = 0; s < 3; ++s) {
      t[a][s] = G[a][0] * g[0][s] + G[a][1] * g[1][s] + G[a][2] * g[2][s];
    }
  }
#pragma unroll
  for (int a = 0; a < A; ++a) {
#pragma unroll
    for (int b = 0; b < A; ++b) {
      const double u = t[a][0] * G[b][0] + t[a][1] * G[b][1] + t[a][2] * G[b][2];
      U[static_cast<size_t>(a * A + b) * plane + i] = static_cast<float>(u);
    }
  }
}

}  // namespace convtune
