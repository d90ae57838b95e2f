"""Write entries.cu: extern "C" instantiations of the prototype wgmma kernel (variants named by their params)."""
import itertools

ARGS = ("const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H, "
        "int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KRp, int chunks_per_split")
CALL = "x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KRp, chunks_per_split"


def variants():
    # layout probes (correctness): swizzle 128B vs core-matrix layout with both LBO/SBO readings, A order
    probes = [(128, 1, 1, 4, 1, 16, 1024, 0), (128, 1, 1, 4, 1, 16, 1024, 1),
              (128, 1, 1, 4, 0, 128, 1024, 0), (128, 1, 1, 4, 0, 1024, 128, 0)]
    perf = []
    for bn, mi, wg, st in itertools.product((64, 128, 256), (1, 2), (1, 2), (3, 4)):
        if mi * bn // 2 > 128:
            continue
        smem = st * (64 * wg * mi + bn) * 128 + 1024
        if smem > 227 * 1024:
            continue
        perf.append((bn, mi, wg, st, 1, 16, 1024, 0))
    return list(dict.fromkeys(probes + perf))


NHWC_ARGS = ("const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp, "
             "int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, "
             "int chunks_per_split")
NHWC_CALL = "xt, filt, y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split"


def nhwc_variants():
    out = []
    for bn, mi, wg, st in itertools.product((64, 128, 256), (1, 2), (1, 2), (4, 6)):
        if mi * bn // 2 > 128:
            continue
        if st * (64 * wg * mi + bn) * 128 + 1024 > 227 * 1024:
            continue
        out.append(("nhwc", bn, mi, wg, st))
    return out


def name(v):
    if v[0] == "nhwc":
        return "wg_nhwc_" + "_".join(str(p) for p in v[1:])
    return "wg_fwd_" + "_".join(str(p) for p in v)


def main():
    out = ['#include "igemm_wgmma_fwd.cu"', ""]
    for v in variants():
        bn, mi, wg, st, swz, lbo, sbo, aord = v
        out.append(f'extern "C" __global__ void __launch_bounds__({128 * wg}) {name(v)}({ARGS}) {{')
        out.append(f"  convtune::igemm_wgmma_fwd_body<{bn}, {mi}, {wg}, {st}, {swz}, {lbo}, {sbo}, {aord}>({CALL});")
        out.append("}")
    for v in nhwc_variants():
        _, bn, mi, wg, st = v
        out.append(f'extern "C" __global__ void __launch_bounds__({128 * wg}) {name(v)}({NHWC_ARGS}) {{')
        out.append(f"  convtune::igemm_wgmma_nhwc_body<{bn}, {mi}, {wg}, {st}>({NHWC_CALL});")
        out.append("}")
    out.append('extern "C" __global__ void __launch_bounds__(256) wg_transform(const float* __restrict__ x, '
               'float* __restrict__ xt, int C, int HW, int Cp) {')
    out.append("  convtune::igemm_wgmma_nhwc_transform_body(x, xt, C, HW, Cp);")
    out.append("}")
    out.append('extern "C" __global__ void wg_nhwc_pack(const float* __restrict__ w, float* __restrict__ filt, int K, '
               'int C, int R, int S, int Cp) {')
    out.append("  convtune::igemm_wgmma_nhwc_pack_body(w, filt, K, C, R, S, Cp);")
    out.append("}")
    out.append('extern "C" __global__ void wg_pack(const float* __restrict__ w, float* __restrict__ filt, int K, int C, '
               'int R, int S, int H, int W, int DH, int DW, int KRp) {')
    out.append("  convtune::igemm_wgmma_pack_body(w, filt, K, C, R, S, H, W, DH, DW, KRp);")
    out.append("}")
    open("entries.cu", "w").write("\n".join(out) + "\n")
    print(len(variants()), "+", len(nhwc_variants()), "variants")


if __name__ == "__main__":
    main()
