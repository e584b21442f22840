G=carry/gpulse
F5=timestamp,utilization.gpu,memory.used,temperature.gpu,power.draw
RICH=timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current,fan.speed
ms() { date +%s%N | cut -c1-13; }
cpu_s() { awk '{print ($14+$15+$16+$17)/100}' /proc/$1/stat; }
echo "### F5 profiled"; GPULSE_PROFILE_NVML=1 $G query --query-gpu=$F5 --format=csv,noheader,nounits
echo "### F5 profiled NO_ATTACH"; GPULSE_NVML_NO_ATTACH=1 GPULSE_PROFILE_NVML=1 $G query --query-gpu=$F5 --format=csv,noheader,nounits
echo "### status profiled twice (second shows warm costs)"; GPULSE_PROFILE_NVML=1 $G status --gpm-interval 0.1 >/dev/null; 
echo "### wall ms: smi, gpulse, gpulse NO_ATTACH, gpulse --version"
for i in $(seq 12); do
  a=$(ms); nvidia-smi --query-gpu=$F5 --format=csv,noheader,nounits >/dev/null; b=$(ms)
  $G query --query-gpu=$F5 --format=csv,noheader,nounits >/dev/null; c=$(ms)
  GPULSE_NVML_NO_ATTACH=1 $G query --query-gpu=$F5 --format=csv,noheader,nounits >/dev/null; d=$(ms)
  $G --version >/dev/null; e=$(ms)
  echo "smi $((b-a)) gpulse $((c-b)) noattach $((d-c)) version $((e-d))"
done
python3 - <<'PY'
import ctypes, time
t=time.perf_counter(); lib=ctypes.CDLL("libnvidia-ml.so.1"); t1=time.perf_counter(); r=lib.nvmlInit_v2(); t2=time.perf_counter(); lib.nvmlShutdown(); t3=time.perf_counter()
print(f"python ctypes: dlopen {1e3*(t1-t):.1f} ms, nvmlInit_v2 {1e3*(t2-t1):.1f} ms, nvmlShutdown {1e3*(t3-t2):.1f} ms")
PY
START=$(date +%s)
nvidia-smi --query-gpu=$RICH --format=csv -lms 100 >/dev/null & A=$!
$G query --query-gpu=$RICH --format=csv -lms 100 >/dev/null & B=$!
$G query --query-gpu=$RICH,gpm.sm_active,gpm.tensor_active,gpm.dram_active --format=csv -lms 100 >/dev/null & C=$!
$G watch -i 0.1 >/dev/null & E=$!
GPULSE_PROFILE_NVML=1 timeout 3 $G watch -i 0.1 2>&1 >/dev/null | tail -12
sleep 17
echo "### CPU seconds over $(( $(date +%s) - START )) s at 100 ms"
echo "nvidia-smi rich: $(cpu_s $A)"; echo "gpulse rich: $(cpu_s $B)"; echo "gpulse rich+gpm (1 s windows): $(cpu_s $C)"; echo "gpulse watch -i 0.1: $(cpu_s $E)"
kill $A $B $C $E; wait 2>/dev/null
