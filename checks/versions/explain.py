"""What each item of ``versions``' findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

# How a fact of the version list is compared between nodes (every fact item but the firmware's).
_COMPARED = (
    " The nodes are grouped by value, a node that reports none counting as `(not found)`: a value "
    "more than half the reachable nodes share is the majority, and the nodes with another are named; "
    "with no majority every node is named. A fact no node reports is not compared, and nothing is "
    "compared with one node reached."
)
# How the GPUs' firmware is compared between nodes.
_FIRMWARE_COMPARED = (
    " GPUs are compared with GPUs of the same model (their name): a node whose GPUs of a model all "
    "run one version has that version, and nodes with another version than most nodes with that "
    "model are named (every node, where no version is held by more than half). Nodes that report no "
    "version are left out, and a node whose own GPUs disagree is reported as mixed instead."
)
_FLASH_FIRST = (
    "Compare `nvidia-smi --query-gpu=index,name,vbios_version,inforom.img --format=csv` on a named "
    "node and a majority node. Bring the named nodes to the firmware the others run (the vendor's "
    "firmware bundle for the board, or nvflash), or reboot them where an update is pending; drain "
    "them if a fix is needed before the job."
)


EXPLAINS = (
    Explanation(
        item="driver",
        means=(
            "Some nodes run another NVIDIA driver than the rest of the job's nodes. Ranks on different "
            "drivers can behave differently inside CUDA and NCCL, and a job can hang or crash in its "
            "collectives; a node missed by a driver rollout, or not yet rebooted into the new one, is "
            "the usual cause. A failure."
        ),
        measured=(
            "The driver version NVML reports (`nvmlSystemGetDriverVersion`), or where NVML cannot be "
            "used, the loaded kernel module's version in /proc/driver/nvidia/version (nvidia-smi as a "
            "last resort)." + _COMPARED
        ),
        threshold="",
        first=(
            "Run `nvidia-smi --query-gpu=driver_version --format=csv,noheader` on a named node and on "
            "a majority node. Install the majority's driver on the named nodes from the same image or "
            "package and reboot them, or drain them for this job."
        ),
        healthy="Every node reports the same driver version.",
    ),
    Explanation(
        item="cuda",
        means=(
            "The CUDA version the NVIDIA driver supports differs between nodes, which means their "
            "drivers differ. A node whose driver supports an older CUDA than torch was built for "
            "cannot run the job's CUDA code, and ranks on different drivers are not a safe mix for "
            "NCCL. A failure."
        ),
        measured=(
            "The driver's CUDA version as NVML reports it (`nvmlSystemGetCudaDriverVersion_v2`, the "
            "`CUDA Version` in nvidia-smi's header), or without NVML, as libcuda's "
            "`cuDriverGetVersion` gives it." + _COMPARED
        ),
        threshold="",
        first=(
            "Compare the header of `nvidia-smi` on a named node and a majority node, and look for the "
            "driver finding beside this one. Install the majority's driver on the named nodes and "
            "reboot them, or drain them for this job."
        ),
        healthy="Every node's driver reports the same CUDA version.",
    ),
    Explanation(
        item="torch",
        means=(
            "The nodes run different torch versions (or builds: the local label such as `+cu121` is "
            "part of the version). Ranks of one job on different torch builds can differ in how they run "
            "collectives and in their numerics, and the job may fail or hang at its first collective or give "
            "results that depend on where a rank ran. A failure."
        ),
        measured=(
            "`torch.__version__`, read by importing torch in the interpreter the run uses (`[run] "
            "python`) on each node." + _COMPARED
        ),
        threshold="",
        first=(
            "Run `PYTHON -c 'import torch; print(torch.__version__, torch.__file__)'` on a named node "
            "and a majority node: a different path often shows a different environment (a user "
            "site-packages, another venv). Rebuild the named nodes' environment from the same image or "
            "lock file as the others."
        ),
        healthy="Every node imports the same torch version, from the same environment.",
    ),
    Explanation(
        item="torch_cuda",
        means=(
            "torch was built against different CUDA versions on different nodes (a cu121 wheel here, "
            "a cu124 wheel there), so the ranks run different CUDA libraries and, usually, different "
            "NCCL and cuDNN builds with them. A failure."
        ),
        measured="`torch.version.cuda`, read by importing torch on each node." + _COMPARED,
        threshold="",
        first=(
            "Compare `PYTHON -c 'import torch; print(torch.version.cuda, torch.__version__)'` and "
            "`PYTHON -m pip list | grep -i nvidia` on a named node and a majority node; reinstall "
            "torch from the same index URL (the same CUDA variant) as the others."
        ),
        healthy="Every node's torch reports the same CUDA version.",
    ),
    Explanation(
        item="cudnn",
        means=(
            "The cuDNN that torch loads differs between nodes. Convolution and attention kernels can "
            "then pick different algorithms on different ranks, which changes numerics and speed "
            "from rank to rank. A failure."
        ),
        measured=(
            "`torch.backends.cudnn.version()`, read by importing torch on each node and decoded to a "
            "version." + _COMPARED
        ),
        threshold="",
        first=(
            "Compare `PYTHON -c 'import torch; print(torch.backends.cudnn.version())'` and the "
            "`nvidia-cudnn-*` wheel in `PYTHON -m pip list` on a named node and a majority node; check "
            "`LD_LIBRARY_PATH` for a system cuDNN loaded in place of torch's own. Align the "
            "environments."
        ),
        healthy="Every node's torch loads the same cuDNN version.",
    ),
    Explanation(
        item="nccl",
        means=(
            "The NCCL that torch uses differs between nodes. NCCL expects every rank of a communicator "
            "to run the same version: mixed versions can fail to initialise, hang in a collective or "
            "pick different algorithms. A failure."
        ),
        measured=(
            "`torch.cuda.nccl.version()`, read by importing torch on each node (only where torch has "
            "CUDA or ROCm)." + _COMPARED
        ),
        threshold="",
        first=(
            "Compare `PYTHON -c 'import torch; print(torch.cuda.nccl.version())'` and the "
            "`nvidia-nccl-*` wheel in `PYTHON -m pip list` on a named node and a majority node; look "
            "for `LD_PRELOAD` or `LD_LIBRARY_PATH` bringing in another libnccl. Align the environments."
        ),
        healthy="Every node's torch uses the same NCCL version.",
    ),
    Explanation(
        item="nccl_system",
        means=(
            "The NCCL library the system's dynamic loader finds (libnccl.so.2) differs between nodes, "
            "or is missing on some. Programs linked against the system NCCL (nccl-tests, a torch "
            "built against it, a library preloaded for the job) then run mixed NCCL versions across "
            "ranks. A failure."
        ),
        measured=(
            "A child process of the probe loads libnccl.so.2 as the dynamic loader finds it "
            "(LD_LIBRARY_PATH, the ld.so cache) and calls `ncclGetVersion`; the probe itself never "
            "loads it, so torch's own NCCL is not mistaken for it." + _COMPARED
        ),
        threshold="",
        first=(
            "Run `ldconfig -p | grep libnccl` and `echo $LD_LIBRARY_PATH` over SSH on a named node and "
            "a majority node, and compare the libnccl2 package versions (`dpkg -l libnccl2` or "
            "`rpm -q libnccl`). Install the majority's NCCL, or remove the stray copy."
        ),
        healthy="Every node's loader finds the same libnccl.so.2 version, or none does.",
    ),
    Explanation(
        item="cudnn_system",
        means=(
            "The cuDNN library the system's dynamic loader finds differs between nodes, or is missing "
            "on some. Anything that loads the system's cuDNN rather than a wheel's runs different "
            "kernels on different ranks. A failure."
        ),
        measured=(
            "A child process of the probe loads libcudnn.so.9, libcudnn.so.8 or libcudnn.so (the first "
            "the dynamic loader finds) and calls `cudnnGetVersion`." + _COMPARED
        ),
        threshold="",
        first=(
            "Run `ldconfig -p | grep libcudnn` and `echo $LD_LIBRARY_PATH` over SSH on a named node "
            "and a majority node, and compare the installed cuDNN packages. Install the majority's "
            "cuDNN, or remove the stray copy."
        ),
        healthy="Every node's loader finds the same cuDNN version, or none does.",
    ),
    Explanation(
        item="nvcc",
        means=(
            "The CUDA compiler differs between nodes, or is missing on some. Extensions compiled on "
            "each node while the job starts (DeepSpeed ops, custom kernels) then differ from node to "
            "node, or fail to build where nvcc is missing. A failure."
        ),
        measured=(
            "`nvcc --version`, for the nvcc found on the PATH of the probe's non-interactive SSH "
            "session; its release (V12.4.131) is the value." + _COMPARED
        ),
        threshold="",
        first=(
            "Run `ssh NODE 'command -v nvcc; nvcc --version'` on a named node and a majority node: a "
            "different path often shows a PATH set only in some nodes' profiles. Install the "
            "majority's CUDA toolkit, or put the same one first on PATH."
        ),
        healthy="Every node's PATH finds the same nvcc release, or none does.",
    ),
    Explanation(
        item="python",
        means=(
            "The Python running the job differs between nodes. A different minor version (3.10 "
            "against 3.11) cannot load the same compiled extensions (their ABI is per minor version) "
            "and runs other library code, so ranks fail to start or disagree; a difference in the "
            "patch level alone rarely matters."
        ),
        measured=(
            "`platform.python_version()` of the interpreter the run uses (`[run] python`) on each "
            "node." + _COMPARED
        ),
        threshold=(
            "A failure when the major.minor versions differ or a node reports none; a warning when only "
            "the patch level differs (fixed rule)."
        ),
        first=(
            "Run `PYTHON -c 'import sys; print(sys.version, sys.executable)'` on a named node and a "
            "majority node: a different executable points to another environment. Rebuild the named "
            "nodes' environment from the same image as the others."
        ),
        healthy="Every node runs the same Python version from the same environment.",
    ),
    Explanation(
        item="kernel",
        means=(
            "The nodes boot different Linux kernels. This rarely breaks a run by itself, but kernel "
            "modules built for each kernel (the GPU and InfiniBand drivers) and kernel behaviour can "
            "then differ too. A warning."
        ),
        measured="The kernel release (`uname -r`) on each node." + _COMPARED,
        threshold="",
        first=(
            "Compare `uname -r` on a named node and a majority node; find out whether the named node "
            "missed an update or a reboot into it, and bring it to the majority's kernel at its next "
            "maintenance."
        ),
        healthy="Every node runs the same kernel release.",
    ),
    Explanation(
        item="os",
        means=(
            "The nodes run different operating system releases. This rarely breaks a run by itself, "
            "but system libraries and packages then differ too. A warning."
        ),
        measured=("The OS name (`PRETTY_NAME`, else `NAME`) from /etc/os-release on each node." + _COMPARED),
        threshold="",
        first=(
            "Compare `cat /etc/os-release` on a named node and a majority node, and reimage the odd "
            "nodes from the cluster's current image at their next maintenance."
        ),
        healthy="Every node reports the same OS release.",
    ),
    Explanation(
        item="packages",
        means=(
            "Installed Python packages differ between nodes: some nodes have another version of a "
            "package, or lack it. Drift in the training stack (torch, triton, NVIDIA's CUDA wheels) "
            "changes what the job runs on those ranks; other packages matter where the job imports "
            "them. The item also names nodes whose packages could not be listed."
        ),
        measured=(
            "The probe lists the distributions on the interpreter's path (`[run] python`), the first "
            "of each name as import loads it, and names are compared as pip normalises them. Each "
            "package is compared between the nodes that listed theirs; a package missing on a node "
            "counts as a version. One finding per set of named nodes and severity lists every package "
            "they differ in; torch is left to its own item."
        ),
        threshold=(
            "Drift in torch, triton, NVIDIA's CUDA wheels (`nvidia-*-cuNN`) or a package matching "
            "{stack_packages} fails; drift in any other package is {package_drift} (fail, warn or "
            "ignore). Packages matching {ignore_packages} are not compared. Nodes that could not list "
            "their packages fail where the others have a training-stack package, else follow "
            "{package_drift}."
        ),
        first=(
            "Diff `PYTHON -m pip freeze` between a named node and a majority node. Rebuild the named "
            "nodes' environment from the same image or lock file as the others; for packages the job "
            "never imports, list them in `ignore_packages`."
        ),
        healthy=(
            "Every package at the same version on every node; the pass says how many packages were compared."
        ),
    ),
    Explanation(
        item="expect",
        means=(
            "A version the config's `[expect]` table asks for is not what the nodes run: some nodes "
            "have another version, lack the fact or package, or the entry itself is invalid or names "
            "nothing any node has. The job would run on a stack other than the one it was validated "
            "on. A failure, checked on a single node too."
        ),
        measured=(
            "Each `[expect]` entry names a fact (driver, cuda, torch, torch_cuda, cudnn, nccl, "
            "nccl_system, cudnn_system, nvcc, python, kernel, os) or an installed package, and each "
            "node's value is matched against it. A plain version is met by that version or one it "
            "is a whole-component prefix of (3.11 meets 3.11.7); an entry starting with an operator is "
            "a PEP 440 specifier set (`>=2.4,<2.6`), pre-releases included."
        ),
        threshold=(
            "The entry's own value in `[expect]`; a local label (`+cu121`) counts only where the entry "
            "names one."
        ),
        first=(
            "Read which nodes miss it and what they have. Install the expected version on them, or, "
            "if the new version is the one you mean to run, change `[expect]` in the config. An "
            "entry naming nothing is usually a typo in the name."
        ),
        healthy="Every `[expect]` entry met on every node; the pass names the expectations met.",
    ),
    Explanation(
        item="gpu_vbios",
        means=(
            "Some nodes' GPUs run another VBIOS than the same model's GPUs on the other nodes. "
            "Firmware can change clocks, power behaviour and fixes, so like GPUs on different "
            "firmware may not perform alike; a node missed by a firmware update is the usual cause. A "
            "warning."
        ),
        measured=(
            "Each GPU's VBIOS version from NVML (`nvmlDeviceGetVbiosVersion`), or from nvidia-smi "
            "where NVML cannot be used." + _FIRMWARE_COMPARED
        ),
        threshold="",
        first=_FLASH_FIRST,
        healthy="Every GPU of a model runs the same VBIOS on every node.",
    ),
    Explanation(
        item="gpu_inforom",
        means=(
            "Some nodes' GPUs run another InfoROM image than the same model's GPUs on the other nodes: "
            "a node missed by a firmware update, most often. The InfoROM holds the GPU's configuration "
            "and error records, so its version should match across like GPUs. A warning."
        ),
        measured=(
            "Each GPU's InfoROM image version from NVML (`nvmlDeviceGetInforomImageVersion`), or from "
            "nvidia-smi (`inforom.img`) where NVML cannot be used." + _FIRMWARE_COMPARED
        ),
        threshold="",
        first=_FLASH_FIRST,
        healthy="Every GPU of a model runs the same InfoROM image on every node.",
    ),
    Explanation(
        item="gpu_firmware",
        means=(
            "Some nodes' GPUs run both another VBIOS and another InfoROM image than the same model's "
            "GPUs on the other nodes: the node missed a whole firmware update. Like GPUs on different "
            "firmware may not perform alike. A warning."
        ),
        measured=(
            "Each GPU's VBIOS and InfoROM image versions from NVML, or from nvidia-smi where NVML "
            "cannot be used; a node that differs in both is named once, here." + _FIRMWARE_COMPARED
        ),
        threshold="",
        first=_FLASH_FIRST,
        healthy="Every GPU of a model runs the same VBIOS and InfoROM image on every node.",
    ),
    Explanation(
        item="gpu_firmware_mixed",
        means=(
            "One node's GPUs of the same model run different VBIOS or InfoROM versions: a GPU swapped "
            "in from another batch, or one an update left behind. The odd GPU may not perform like "
            "its neighbours in the node. A warning."
        ),
        measured=(
            "The VBIOS and InfoROM image versions of each of the node's GPUs (NVML, or nvidia-smi), "
            "grouped by model; the finding names the GPUs by index for each version. That node is not "
            "compared with the other nodes for that kind of firmware."
        ),
        threshold="",
        first=(
            "Run `nvidia-smi --query-gpu=index,serial,vbios_version,inforom.img --format=csv` on the "
            "node to see the odd GPU. Flash it to match the others (the vendor's firmware bundle for "
            "the board, or nvflash), or have the vendor replace it."
        ),
        healthy="All of a node's GPUs of one model run the same VBIOS and InfoROM image.",
    ),
    Explanation(
        item="gpu_inforom_corrupt",
        means=(
            "NVML found the InfoROM of one or more of the node's GPUs corrupted. The InfoROM holds "
            "the GPU's configuration and its error records (ECC, retired pages), so the GPU cannot be "
            "trusted to record or act on memory errors. A failure: the node is drained."
        ),
        measured=(
            "`nvmlDeviceValidateInforom` on every GPU of the node; NVML's corrupted-InfoROM error "
            "(what makes nvidia-smi exit with status 14) marks the GPU. Only NVML can tell: a node read "
            "through nvidia-smi alone is not judged. The finding names the GPUs by index and serial."
        ),
        threshold="",
        first=(
            "Drain the node. Confirm with `nvidia-smi` (it warns that the infoROM is corrupted and "
            "exits with status 14) or DCGM's InfoROM test, and open a case with the vendor to reflash "
            "or replace the GPU, giving them its serial."
        ),
        healthy="Every GPU's InfoROM passes its checksum validation.",
    ),
)
