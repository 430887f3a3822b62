import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { findNatsServer } from '../../src/runtime/embedded-nats.ts';
import { dieWithParent } from '../../src/runtime/die-with-parent.ts';
import { freePort } from '../../src/runtime/free-port.ts';

export interface ClusterNode {
  /** 0-based; what kill/restart/leaderOf speak in. */
  index: number;
  /** The server_name, as JetStream reports leaders and peers. */
  name: string;
  url: string;
  port: number;
  clusterPort: number;
  /** The monitoring port (/jsz, /connz). */
  httpPort: number;
  storeDir: string;
}

export interface NatsCluster {
  /** Every node's client URL, comma-separated: what NATS_URL takes. */
  urls: string;
  nodes: readonly ClusterNode[];
  running(node: number): boolean;
  /** SIGKILL (kill -9); resolves once the process is gone. */
  kill(node: number): Promise<void>;
  /** Starts a killed node again on its own store and ports; resolves once it is back in the JetStream cluster. */
  restart(node: number): Promise<void>;
  /** The node leading a stream's (or KV bucket's stream's) raft group; waits up to `timeoutMs` for an election. */
  leaderOf(stream: string, timeoutMs?: number): Promise<number>;
  /** The node leading a durable consumer's raft group. */
  consumerLeaderOf(stream: string, consumer: string, timeoutMs?: number): Promise<number>;
  /** leaderOf('KV_leases'). */
  leasesLeader(timeoutMs?: number): Promise<number>;
  /**
   * Steps the stream's leader down until `want(leader)` holds (JetStream 2.9 cannot
   * name the next leader, so this retries); false when it did not get there in time.
   */
  moveLeader(stream: string, want: (node: number) => boolean, timeoutMs?: number): Promise<boolean>;
  /** Resolves once every listed stream has a leader and every replica is current (a restarted node has caught up). */
  waitHealthy(streams: string[], timeoutMs?: number): Promise<void>;
  /** The running node holding a client connection whose name starts with `namePrefix`. */
  clientNode(namePrefix: string): Promise<number | undefined>;
  /** The last lines a node printed, for failure messages. */
  tail(node: number): string[];
  /** Kills every node and removes their stores; safe to call twice and after a failed start. */
  stop(): Promise<void>;
}

interface Proc {
  child: ChildProcess;
  exited: Promise<void>;
}

const READY_TIMEOUT_MS = 20_000;

/**
 * A JetStream cluster of real nats-server processes on loopback, each with its own
 * store, server_name (2.9 refuses clustered JetStream without one) and ports.
 * Resolves once the meta group has a leader that every node agrees on.
 */
export async function startNatsCluster(opts: { size?: number; log?: (line: string) => void } = {}): Promise<NatsCluster> {
  const binary = findNatsServer();
  if (!binary) throw new Error('nats-server not found');
  const size = opts.size ?? 3;
  const log = opts.log ?? (() => {});
  const root = await mkdtemp(path.join(os.tmpdir(), 'jetcron-test-cluster-'));
  const procs: Array<Proc | undefined> = [];
  const tails: string[][] = [];
  const nodes: ClusterNode[] = [];
  let admin: NatsConnection | undefined;
  let jsm: JetStreamManager | undefined;
  let stopped: Promise<void> | undefined;

  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      await admin?.close().catch(() => {});
      await Promise.all(procs.map((_, i) => killNode(i)));
      await rm(root, { recursive: true, force: true });
    })();
    return stopped;
  };

  const killNode = async (i: number): Promise<void> => {
    const p = procs[i];
    if (!p) return;
    procs[i] = undefined;
    p.child.kill('SIGKILL');
    await p.exited;
  };

  const launch = async (node: ClusterNode): Promise<void> => {
    // SIGKILL with the parent too: a test process killed mid-run must not leave a cluster behind.
    const cmd = dieWithParent(binary, ['-c', path.join(node.storeDir, 'nats.conf')], 'SIGKILL');
    const child = spawn(cmd.file, cmd.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const tail = (tails[node.index] ??= []);
    const onOutput = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        tail.push(line);
        if (tail.length > 200) tail.shift();
        log(`[${node.name}] ${line}`);
      }
    };
    child.stdout?.on('data', onOutput);
    child.stderr?.on('data', onOutput);
    const exited = new Promise<void>((resolve) => {
      child.once('close', () => resolve());
      child.once('error', (err) => {
        tail.push(String(err));
        resolve();
      });
    });
    procs[node.index] = { child, exited };
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!(await canConnect(node.port))) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${node.name} exited at start:\n${tail.slice(-20).join('\n')}`);
      if (Date.now() > deadline) throw new Error(`${node.name} did not listen on ${node.port}:\n${tail.slice(-20).join('\n')}`);
      await sleep(50);
    }
  };

  // The meta leader as each running node sees it, from the monitoring endpoint:
  // independent of any client connection, so it works while elections are under way.
  const metaAgreed = async (): Promise<boolean> => {
    const leaders = new Set<string>();
    for (const node of nodes) {
      if (!procs[node.index]) continue;
      const jsz = await monitor(node, '/jsz').catch(() => undefined) as { meta_cluster?: { leader?: string; cluster_size?: number } } | undefined;
      const leader = jsz?.meta_cluster?.leader;
      if (!leader || jsz.meta_cluster?.cluster_size !== size) return false;
      leaders.add(leader);
    }
    return leaders.size === 1;
  };

  const waitFor = async (what: string, fn: () => Promise<boolean>, timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!(await fn().catch(() => false))) {
      if (Date.now() > deadline) throw new Error(`nats cluster: ${what} not within ${timeoutMs} ms`);
      await sleep(100);
    }
  };

  const nodeByName = (name: string | undefined): number => nodes.findIndex((n) => n.name === name);

  try {
    for (let i = 0; i < size; i++) {
      const storeDir = path.join(root, `n${i + 1}`);
      nodes.push({ index: i, name: `n${i + 1}`, url: '', port: await freePort(), clusterPort: await freePort(), httpPort: await freePort(), storeDir });
      nodes[i]!.url = `nats://127.0.0.1:${nodes[i]!.port}`;
    }
    const routes = nodes.map((n) => `nats-route://127.0.0.1:${n.clusterPort}`);
    for (const node of nodes) {
      await mkdir(node.storeDir, { recursive: true });
      await writeFile(path.join(node.storeDir, 'nats.conf'), [
        `server_name: ${node.name}`,
        `host: "127.0.0.1"`,
        `port: ${node.port}`,
        `http: "127.0.0.1:${node.httpPort}"`,
        // The same as the embedded server: the service's stream limits assume it.
        'max_payload: 8MB',
        'jetstream {',
        `  store_dir: ${JSON.stringify(path.join(node.storeDir, 'jetstream'))}`,
        '}',
        'cluster {',
        '  name: jetcron-test',
        `  listen: "127.0.0.1:${node.clusterPort}"`,
        `  routes: [${routes.map((r) => JSON.stringify(r)).join(', ')}]`,
        '}',
        '',
      ].join('\n'));
    }
    await Promise.all(nodes.map(launch));
    await waitFor('a JetStream meta leader', metaAgreed, READY_TIMEOUT_MS);
    admin = await connect({ servers: nodes.map((n) => n.url), name: 'nats-cluster admin', maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    jsm = await jetstreamManager(admin, { timeout: 3000 });
  } catch (err) {
    await stop();
    throw err;
  }
  const manager = jsm;
  const adminNc = admin;

  const leaderOf = async (stream: string, timeoutMs = 30_000): Promise<number> => {
    let found = -1;
    await waitFor(`a leader for ${stream}`, async () => {
      const info = await manager.streams.info(stream);
      found = nodeByName(info.cluster?.leader);
      return found >= 0 && !!procs[found];
    }, timeoutMs);
    return found;
  };

  return {
    urls: nodes.map((n) => n.url).join(','),
    nodes,
    running: (i) => !!procs[i],
    kill: killNode,
    async restart(i) {
      const node = nodes[i]!;
      if (procs[i]) throw new Error(`${node.name} is running`);
      await launch(node);
      await waitFor(`${node.name} back in the meta group`, metaAgreed, READY_TIMEOUT_MS);
    },
    leaderOf,
    async consumerLeaderOf(stream, consumer, timeoutMs = 30_000) {
      let found = -1;
      await waitFor(`a leader for ${stream} > ${consumer}`, async () => {
        const info = await manager.consumers.info(stream, consumer);
        found = nodeByName(info.cluster?.leader);
        return found >= 0 && !!procs[found];
      }, timeoutMs);
      return found;
    },
    leasesLeader: (timeoutMs) => leaderOf('KV_leases', timeoutMs),
    async moveLeader(stream, want, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const leader = await leaderOf(stream, Math.max(1000, deadline - Date.now())).catch(() => -1);
        if (leader >= 0 && want(leader)) return true;
        if (Date.now() > deadline) return false;
        if (leader >= 0) {
          await adminNc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, undefined, { timeout: 3000 }).catch(() => {});
          // Wait for the group to elect someone else before asking again.
          await waitFor(`${stream} to change leader`, async () => {
            const info = await manager.streams.info(stream);
            const now = nodeByName(info.cluster?.leader);
            return now >= 0 && now !== leader;
          }, Math.max(1000, deadline - Date.now())).catch(() => {});
        }
      }
    },
    async waitHealthy(streams, timeoutMs = 30_000) {
      await waitFor('the cluster to be healthy', async () => {
        if (!(await metaAgreed())) return false;
        for (const stream of streams) {
          const info = await manager.streams.info(stream);
          const c = info.cluster;
          if (!c?.leader || nodeByName(c.leader) < 0) return false;
          const replicas = c.replicas ?? [];
          if (replicas.length !== size - 1 || replicas.some((r) => !r.current || r.offline)) return false;
        }
        return true;
      }, timeoutMs);
    },
    async clientNode(namePrefix) {
      for (const node of nodes) {
        if (!procs[node.index]) continue;
        const connz = await monitor(node, '/connz?limit=1024').catch(() => undefined) as { connections?: Array<{ name?: string }> } | undefined;
        if (connz?.connections?.some((c) => c.name?.startsWith(namePrefix))) return node.index;
      }
      return undefined;
    },
    tail: (i) => [...(tails[i] ?? [])],
    stop,
  };
}

async function monitor(node: ClusterNode, p: string): Promise<unknown> {
  const res = await fetch(`http://127.0.0.1:${node.httpPort}${p}`, { signal: AbortSignal.timeout(2000) });
  if (!res.ok) throw new Error(`${node.name} ${p}: ${res.status}`);
  return res.json();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.setTimeout(1000);
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}
