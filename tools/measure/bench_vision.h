/* nib bench --model on a vision blob (tools/measure/bench_vision.c). */
#ifndef NIB_BENCH_VISION_H
#define NIB_BENCH_VISION_H

int nib_bench_is_vision(const char *path);
int nib_bench_vision_main(int argc, char **argv);

#endif
