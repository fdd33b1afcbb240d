/* `nib synth resnet50`: a random-weight ResNet-50 v1.5 (torchvision's
 * layout and names) written as an ONNX model (opset 13, input `input`
 * 1x3x224x224 f32, output `logits` 1x1000), packed with the same protobuf-c
 * code the importer reads with. The bytes are a pure function of the seed. */
#ifndef NIB_ONNX_SYNTH_H
#define NIB_ONNX_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* 0, or -1 with a message in err. */
int nx_synth_resnet50(FILE *out, uint64_t seed, char *err, size_t errlen);

#endif
