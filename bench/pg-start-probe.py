#!/usr/bin/env python3
"""What one PostgreSQL start costs, outside dbfork: RUNS times, reflink-copy
a golden's data dir, start postgres on it with dbfork's test profile (plus
any SETTING=VALUE given), time exec -> "ready" in postmaster.pid, leave it
idle 0.3 s, stop it (SIGQUIT) and take the CPU time of the postmaster and
all its children from wait4. Prints the median and range of both.

  sudo bench/pg-start-probe.py GOLDEN_DATA_DIR [RUNS] [SETTING=VALUE ...]

Env: PG_BIN (default /usr/lib/postgresql/15/bin), PROBE_DIR (a scratch dir
on the same filesystem as the golden; default GOLDEN/../../../probe-start),
RUN_AS (default dbfork: PostgreSQL refuses to run as root).
"""
import os
import pwd
import signal
import statistics
import subprocess
import sys
import time

gold = os.path.abspath(sys.argv[1])
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
extra = sys.argv[3:]
pg_bin = os.environ.get('PG_BIN', '/usr/lib/postgresql/15/bin')
probe = os.environ.get('PROBE_DIR', os.path.join(gold, '..', '..', '..', 'probe-start'))
user = pwd.getpwnam(os.environ.get('RUN_AS', 'dbfork'))
data, sock = os.path.join(probe, 'data'), os.path.join(probe, 'sock')

settings = dict(fsync='off', synchronous_commit='off', full_page_writes='off', shared_buffers='32MB',
                wal_level='minimal', max_wal_senders='0', max_wal_size='1GB', checkpoint_timeout='30min',
                jit='off', track_io_timing='off', max_worker_processes='4', max_parallel_workers='2',
                log_checkpoints='off', log_min_messages='warning', dynamic_shared_memory_type='posix',
                listen_addresses='127.0.0.1', unix_socket_directories=sock, port='54999')
for kv in extra:
    k, v = kv.split('=', 1)
    settings[k] = v
argv = [os.path.join(pg_bin, 'postgres'), '-D', data]
for k in sorted(settings):
    argv += ['-c', f'{k}={settings[k]}']


def as_user():
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)


os.makedirs(sock, exist_ok=True)
os.chown(sock, user.pw_uid, user.pw_gid)
ready_ms, cpu_ms = [], []
for _ in range(runs):
    subprocess.run(['rm', '-rf', data], check=True)
    subprocess.run(['cp', '-a', '--reflink=always', gold, data], check=True)
    subprocess.run(['chown', '-R', f'{user.pw_uid}:{user.pw_gid}', data], check=True)
    os.sync()
    with open(os.path.join(probe, 'log'), 'w') as log:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, preexec_fn=as_user, stdout=log, stderr=subprocess.STDOUT)
        while True:
            try:
                with open(os.path.join(data, 'postmaster.pid')) as f:
                    lines = f.read().split('\n')
                if len(lines) > 7 and lines[7].strip() == 'ready':
                    break
            except FileNotFoundError:
                pass
            if p.poll() is not None:
                sys.exit(f'postgres exited with {p.returncode}; see {probe}/log')
            time.sleep(0.0005)
        ready_ms.append((time.monotonic() - t0) * 1000)
        time.sleep(0.3)
        os.kill(p.pid, signal.SIGQUIT)
        _, _, ru = os.wait4(p.pid, 0)
        cpu_ms.append((ru.ru_utime + ru.ru_stime) * 1000)
subprocess.run(['rm', '-rf', data], check=True)
label = ' '.join(extra) or 'profile as is'
print(f'{label}: ready p50 {statistics.median(ready_ms):.1f} ms ({min(ready_ms):.1f}-{max(ready_ms):.1f}), '
      f'CPU with children p50 {statistics.median(cpu_ms):.1f} ms ({min(cpu_ms):.1f}-{max(cpu_ms):.1f}), {runs} runs')
