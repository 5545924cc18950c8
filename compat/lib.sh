# Shared by the compat/*.sh checks: each starts a throwaway devui, drives a real client program
# against it, and stops it. Source it after setting READY_TIMEOUT; it uses DEVUI_PID.

# compat_tmp makes the check's temporary folder in TMP. As root, devui runs the embedded
# PostgreSQL as user postgres, which must be able to reach the data dir: others may traverse (not
# list) it.
compat_tmp() {
	TMP="$(mktemp -d "${TMPDIR:-/tmp}/loupe-$1.XXXXXX")"
	chmod 0711 "$TMP"
}

# stop_devui stops the devui of DEVUI_PID with SIGINT (it stops what it runs, then the embedded
# PostgreSQL), and kills it when it has not stopped after 30 s.
stop_devui() {
	if [[ -n "${DEVUI_PID:-}" ]] && kill -0 "$DEVUI_PID" 2>/dev/null; then
		kill -INT "$DEVUI_PID" 2>/dev/null || true
		for _ in $(seq 1 300); do
			kill -0 "$DEVUI_PID" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$DEVUI_PID" 2>/dev/null; then
			echo "devui did not stop after SIGINT; killing it" >&2
			kill -KILL "$DEVUI_PID" 2>/dev/null || true
		fi
		wait "$DEVUI_PID" 2>/dev/null || true
	fi
	DEVUI_PID=""
}

# free_port prints an unused loopback port: the kernel's pick through node, or else a random one
# that nothing answers on.
free_port() {
	node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})' 2>/dev/null && return
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "ERROR: no free port" >&2
	return 1
}

# wait_ready waits until the devui of DEVUI_PID answers URL/readyz, for at most READY_TIMEOUT s.
wait_ready() {
	local deadline=$((SECONDS + READY_TIMEOUT))
	until curl -fsS -o /dev/null "$1/readyz" 2>/dev/null; do
		if ! kill -0 "$DEVUI_PID" 2>/dev/null; then
			echo "ERROR: devui exited before becoming ready" >&2
			exit 1
		fi
		if ((SECONDS >= deadline)); then
			echo "ERROR: devui not ready after ${READY_TIMEOUT}s" >&2
			exit 1
		fi
		sleep 0.25
	done
}
