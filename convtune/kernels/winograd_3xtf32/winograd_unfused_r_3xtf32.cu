// Unfused Winograd F(m×m, r×r) forward for 3×3, 5×5 and 7×7 filters at strict fp32 accuracy with the α² batched
// GEMMs on TF32 tensor cores (family winograd_unfused_3xtf32): the large-filter family's transforms
// (winograd_unfused_r.cu, r a template parameter: 3 gives the 3×3 path's F(m, 3)) and the TF32 family's GEMM body
// (winograd_unfused_tf32.cu) instantiated with PRODUCTS = 3, three mma.sync TF32 products per term on split operands
// (hi + lo words) — the products' error stays at fp32's order while the GEMM runs at a third of the TF32 tensor-core
// rate instead of the fp32 FMA rate.
//
//   0. filter transform  w (K,C,r,r)            -> U (α², Cp, Kp)   (the fp32 unfused family's of the same r)
//   1. input transform   x (N,C,H,W)            -> V (α², Cp, Tp)   winograd_input_body_r
//   2. batched GEMM      U, V                    -> M (α², Kp, Tp)   winograd_tc_gemm_body<..., 3>
//   3. output transform  M                        -> y (N,K,P,Q)      winograd_output_body_r
//
// The includes are expanded once each, so winograd_unfused.cu, which both include, appears once.
#include "winograd_unfused_r.cu"
#include "winograd_unfused_tf32.cu"
