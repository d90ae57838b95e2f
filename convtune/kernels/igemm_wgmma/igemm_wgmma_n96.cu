// convtune-arch: sm_90a   (wgmma assembles only for the arch-specific Hopper target)
//
// The general wgmma kernel (igemm_wgmma_fwd.cu: every class, copying or TMA-fed, the same layouts, layout change,
// filter packing and epilogue) with column tiles of BN = 96 or 192 output channels: the igemm_wgmma_n96 and
// igemm_wgmma_half_n96 families. A layer with K = 192 (AlexNet conv2, Inception's 192-channel branches) or 576 fills
// its tiles instead of leaving a quarter of a 256-wide tile's MMAs on zero rows; K = 96 and 288 likewise.
#include "igemm_wgmma_fwd.cu"
#include "wgmma_ss_n96.cuh"
