# Sourced by the device scripts: start_pod_job SECONDS starts a matmul job for SECONDS in a new
# cgroup shaped as kubelet's systemd driver makes a pod's container, and sets D (the cgroup's
# folder, to rmdir after the job) and J (the job's PID).
start_pod_job() {
  local uid=6b8f1c2e-4a3d-4e5f-9a0b-1c2d3e4f5a6b cid root
  cid=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then root=/sys/fs/cgroup; else root=/sys/fs/cgroup/unified; fi
  D=$root/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${uid//-/_}.slice/cri-containerd-$cid.scope
  mkdir -p "$D"
  python3 -c "
import torch, time
x = torch.randn(4096, 4096, device='cuda')
t = time.time()
while time.time() - t < $1:
    x @ x; torch.cuda.synchronize()
" & J=$!
  echo $J > "$D/cgroup.procs"
}
