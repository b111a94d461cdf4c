/* A fake NVML for the mini-cluster, which has no GPU: built as libnvidia-ml.so.1, it is
 * found by dlopen("libnvidia-ml.so.1") through LD_LIBRARY_PATH, the same run-time path
 * that loads the real one. It serves the functions slurm-dl calls with values a test
 * scripts in the file named by $DL_FAKE_NVML, one line per fake GPU:
 *
 *   <node> <minor> <utilization %> <memory used MiB> <memory total MiB> <power W>
 *
 * <node> is a host name (the mini-cluster's nodes have their own) or "*" for every
 * node; <minor> is the device's minor number (/dev/nvidia<minor>). The file is read
 * again at every query, so a test can change the values while a job runs. Without the
 * variable or the file, nvmlInit fails as it does on a node without the driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
enum { OK = 0, ERROR_INVALID_ARGUMENT = 2, ERROR_NOT_FOUND = 6, ERROR_DRIVER_NOT_LOADED = 9 };

typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

struct fake_gpu {
  unsigned minor, util, power_w;
  unsigned long long used_mib, total_mib;
};
typedef struct fake_gpu* nvmlDevice_t;

enum { MAX_GPUS = 64 };
static struct fake_gpu gpus[MAX_GPUS];

/* This node's lines of the script, in order; -1 when there is no script. */
static int load(void) {
  const char* path = getenv("DL_FAKE_NVML");
  char host[256] = "", node[256], line[512];
  int n = 0;
  if (!path) return -1;
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  gethostname(host, sizeof host - 1);
  while (n < MAX_GPUS && fgets(line, sizeof line, f)) {
    struct fake_gpu g;
    if (sscanf(line, "%255s %u %u %llu %llu %u", node, &g.minor, &g.util, &g.used_mib, &g.total_mib,
               &g.power_w) != 6)
      continue;
    if (strcmp(node, "*") == 0 || strcmp(node, host) == 0) gpus[n++] = g;
  }
  fclose(f);
  return n;
}

/* The current values of the device that had minor number `d->minor` at the last load. */
static struct fake_gpu* fresh(nvmlDevice_t d) {
  const unsigned minor = d->minor;
  const int n = load();
  for (int i = 0; i < n; ++i) {
    if (gpus[i].minor == minor) return &gpus[i];
  }
  return NULL;
}

nvmlReturn_t nvmlInit_v2(void) { return load() < 0 ? ERROR_DRIVER_NOT_LOADED : OK; }
nvmlReturn_t nvmlShutdown(void) { return OK; }

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case OK: return "Success";
    case ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case ERROR_NOT_FOUND: return "Not Found";
    case ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  const int n = load();
  if (n < 0) return ERROR_DRIVER_NOT_LOADED;
  *count = (unsigned)n;
  return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  const int n = load();
  if (n < 0) return ERROR_DRIVER_NOT_LOADED;
  if (index >= (unsigned)n) return ERROR_INVALID_ARGUMENT;
  *device = &gpus[index];
  return OK;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  *minor = device->minor;
  return OK;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) {
  const struct fake_gpu* g = fresh(device);
  if (!g) return ERROR_NOT_FOUND;
  u->gpu = g->util;
  u->memory = g->util / 2;
  return OK;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* m) {
  const struct fake_gpu* g = fresh(device);
  if (!g) return ERROR_NOT_FOUND;
  m->total = g->total_mib << 20;
  m->used = g->used_mib << 20;
  m->free = m->total - m->used;
  return OK;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  const struct fake_gpu* g = fresh(device);
  if (!g) return ERROR_NOT_FOUND;
  *milliwatts = g->power_w * 1000;
  return OK;
}
