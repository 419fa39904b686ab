// The built-in suite's node:test reporter, for grade.py: writes "passed ID" or "failed ID" for each test as it ends
// (ID is "suite > ... > test"), then "done", to the fd in $LEAFCOST_RESULTS_FD. Run in the test process itself,
// never with `node --test` (whose test files report to it through their stdout, which the code under test owns):
//
//   node --import /tests/node_reporter.mjs --test-reporter=/tests/node_reporter.mjs /tests/x.test.js
//
// Loaded by --import before the test file, it freezes node:test and node:assert, so the code under test cannot
// swap an assertion or test() for a no-op; the runner itself uses only primordials. A skipped or todo test is no
// pass. Copied from sandbox/suites/grading/ into the task's tests/ (Harbor tasks are self-contained).
import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
for (const name of ['node:test', 'node:assert', 'node:assert/strict']) Object.freeze(require(name));
const fd = Number(process.env.LEAFCOST_RESULTS_FD);

export default async function* report(source) {
  const pending = []; // finished tests below the current suite: {nesting, id, outcome}
  for await (const { type, data } of source) {
    if (type !== 'test:pass' && type !== 'test:fail') continue;
    const outcome = type === 'test:pass' && !data.skip && !data.todo ? 'passed' : 'failed';
    const inside = [];
    while (pending.length && pending.at(-1).nesting > data.nesting) inside.unshift(pending.pop());
    if (inside.length === 0) pending.push({ nesting: data.nesting, id: data.name, outcome }); // a test
    for (const test of inside) pending.push({ ...test, nesting: data.nesting, id: `${data.name} > ${test.id}` });
    if (data.nesting === 0) {
      for (const test of pending.splice(0)) writeSync(fd, `${test.outcome} ${test.id}\n`);
    }
    const why = outcome === 'passed' ? '' : `: ${data.details?.error?.message ?? 'skipped'}`;
    yield `${outcome === 'passed' ? 'ok' : 'not ok'} ${data.name}${why}\n`; // for people: test_output.txt
  }
  writeSync(fd, 'done\n');
}
