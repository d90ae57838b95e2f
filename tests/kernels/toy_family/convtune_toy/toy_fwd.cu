// The toy family's kernel source: only hashed (its kernel version), never compiled.
extern "C" __global__ void toy_fwd(float* y) { y[threadIdx.x] = 0.0f; }
