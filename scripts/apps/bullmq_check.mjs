// BullMQ (with ioredis) against `cascade serve`: two producers, two workers, delayed
// and retried jobs; every job completes exactly once. Usage: node bullmq_check.mjs PORT
import { Queue, Worker, QueueEvents } from "bullmq";
import IORedis from "ioredis";

const port = Number(process.argv[2]);
const connection = { host: "127.0.0.1", port, maxRetriesPerRequest: null };
const name = "check-" + Date.now();
const queue = new Queue(name, { connection });
const events = new QueueEvents(name, { connection });
await events.waitUntilReady();
const redis = new IORedis(connection);
const runs = new Map();
let failedOnce = false;
const processor = async (job) => {
  runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
  if (job.name === "flaky" && !failedOnce) {
    failedOnce = true;
    throw new Error("first attempt fails on purpose");
  }
  return job.data.n * 2;
};
const workers = [1, 2].map(() => new Worker(name, processor, { connection, concurrency: 4 }));
const N = 200;
const ids = [];
const add = async (from, to) => {
  for (let i = from; i < to; i++) {
    const j = await queue.add("plain", { n: i });
    ids.push(j.id);
  }
};
await Promise.all([add(0, N / 2), add(N / 2, N)]);
const delayed = await queue.add("plain", { n: 7 }, { delay: 500 });
const flaky = await queue.add("flaky", { n: 5 }, { attempts: 3, backoff: { type: "fixed", delay: 100 } });
ids.push(delayed.id, flaky.id);
const deadline = Date.now() + 60000;
for (;;) {
  const c = await queue.getCompletedCount();
  if (c === ids.length) break;
  if (Date.now() > deadline) throw new Error(`only ${c} of ${ids.length} jobs completed`);
  await new Promise((r) => setTimeout(r, 100));
}
for (const id of ids) {
  const job = await queue.getJob(id);
  if (job.returnvalue !== job.data.n * 2) throw new Error(`job ${id}: ${job.returnvalue}`);
  const want = id === flaky.id ? 2 : 1;
  if (runs.get(id) !== want) throw new Error(`job ${id} ran ${runs.get(id)} times, want ${want}`);
}
await Promise.all(workers.map((w) => w.close()));
await events.close();
await queue.obliterate({ force: true });
await queue.close();
await redis.quit();
console.log(`bullmq: ok (${ids.length} jobs from 2 producers on 2 workers, exactly once; a delayed job; a retried job)`);
