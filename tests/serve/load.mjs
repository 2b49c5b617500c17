// autocannon against petrel-serve with varied requests, every answer checked against the
// one expected for that request: the load test's and the bench's measure of errors, lost
// and mixed-up answers.
import autocannon from 'autocannon';

// Sends `bodies` (JSON values, taken in turn by every connection) to `path` with
// `connections` clients for `seconds`; `expected[i]` is what `answer(json)` of body i's
// response must equal (compared as JSON).
export async function load({ url, path, bodies, expected, answer, connections, seconds, headers = {} }) {
  let next = 0, checked = 0, mismatches = 0, firstMismatch = null;
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    requests: [{
      method: 'POST',
      path,
      headers: { 'content-type': 'application/json', ...headers },
      setupRequest: (req, context) => {
        const i = next++ % bodies.length;
        context.index = i;
        return { ...req, body: JSON.stringify(bodies[i]) };
      },
      onResponse: (status, body, context) => {
        if (status !== 200) return;  // counted by autocannon as non-2xx
        checked++;
        let got;
        try { got = answer(JSON.parse(body)); } catch { got = body; }
        if (JSON.stringify(got) !== JSON.stringify(expected[context.index])) {
          mismatches++;
          firstMismatch ??= { request: bodies[context.index], expected: expected[context.index], got };
        }
      },
    }],
  });
  return {
    requests: result.requests.total,
    perSecond: result.requests.average,
    latencyMs: { p50: result.latency.p50, p99: result.latency.p99 },
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    checked,
    mismatches,
    firstMismatch,
  };
}
