#!/bin/sh
# secure-env.sh PROBE FIXTURE WORKDIR: OPENVERBS_UMAD_SYSFS_ROOT is honoured
# normally and ignored in a setuid program.  Needs root (chown); the setuid
# copy belongs to nobody (65534) and lives in WORKDIR (must allow setuid).
set -u
probe=$1; fx=$2; work=$3
[ "$(id -u)" = 0 ] || { echo "FAIL: needs root (makes a setuid copy owned by nobody)"; exit 1; }
rm -rf "$work"; mkdir -p "$work"; chmod 755 "$work"
cp "$probe" "$work/probe-suid" && chown 65534 "$work/probe-suid" && chmod 4755 "$work/probe-suid" \
  || { echo "FAIL: cannot make the setuid copy"; exit 1; }
plain=$(OPENVERBS_UMAD_SYSFS_ROOT=$fx "$probe")
suid=$(OPENVERBS_UMAD_SYSFS_ROOT=$fx "$work/probe-suid")
echo "plain:  $plain"; echo "setuid: $suid"
case $suid in *"euid 65534"*) ;; *) echo "FAIL: the copy did not run setuid (nosuid mount?)"; exit 1 ;; esac
case $plain in *"cas 4: hfi1_0 mlx4_0 mlx5_0 mlx5_1"*) ;; *) echo "FAIL: override not honoured"; exit 1 ;; esac
case $suid in *hfi1_0*|*mlx4_0*) echo "FAIL: override honoured in a setuid program"; exit 1 ;; esac
echo PASS
