// Submits a batch job through libslurm with a SPANK environment of the caller's choice,
// as a client that skips the SPANK plugin can (issue 12: job_submit/dl must not trust
// it). Usage: submit_raw [-p partition] [-w command] NAME=value... (the job's
// spank_job_env; the batch script runs `command`, `true` by default).
// Prints the job id; on a rejection, Slurm's error and exit status 1.
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  slurm_init(nullptr);
  job_desc_msg_t desc;
  slurm_init_job_desc_msg(&desc);
  std::string partition;
  std::string script = "#!/bin/sh\ntrue\n";
  std::vector<char*> spank_env;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
      partition = argv[++i];
    } else if (std::strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
      script = std::string("#!/bin/sh\n") + argv[++i] + "\n";
    } else {
      spank_env.push_back(argv[i]);
    }
  }
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return 2;
  char name[] = "submit_raw";
  char path[] = "PATH=/usr/bin:/bin";
  char* env[] = {path};
  desc.name = name;
  desc.script = script.data();
  desc.work_dir = cwd;
  desc.environment = env;
  desc.env_size = 1;
  desc.user_id = getuid();
  desc.group_id = getgid();
  if (!partition.empty()) desc.partition = partition.data();
  desc.spank_job_env = spank_env.data();
  desc.spank_job_env_size = static_cast<std::uint32_t>(spank_env.size());
  submit_response_msg_t* resp = nullptr;
  if (slurm_submit_batch_job(&desc, &resp) != SLURM_SUCCESS) {
    std::fprintf(stderr, "submit_raw: %s\n", slurm_strerror(errno));
    return 1;
  }
  std::printf("%u\n", resp->job_id);
  slurm_free_submit_response_response_msg(resp);
  slurm_fini();
  return 0;
}
