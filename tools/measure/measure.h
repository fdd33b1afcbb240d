/* The measurement commands of `nib` (tools/measure/): accuracy against f32
 * (eval) and speed (bench: bandwidth, kernels, whole models, latency). Each
 * takes argv with argv[0] = its name and returns the process exit status
 * (0 ok, 1 failure, 2 usage error). */
#ifndef NIB_MEASURE_H
#define NIB_MEASURE_H

int nib_eval_main(int argc, char **argv);
int nib_bench_main(int argc, char **argv);
int nib_bench_latency_main(int argc, char **argv); /* nib bench --latency */

#endif
