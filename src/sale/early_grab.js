// Grab before the shop's WASM arrives: see `sale/early.rs`. Inline in the shop page;
// the island sets `seckillLive` as it hydrates, and this script stands down.
(() => {
  // The gate's time when the page was rendered, and this clock's reading when it
  // arrived: "now" by them is never ahead of the gate's.
  const gate = Number(document.currentScript.dataset.gate);
  // Where presses and their answers are said until the island shows them on the cards
  // (it empties this as it takes over): the order id at once, even with no WASM. One
  // line per sale pressed, named by its card when there are several.
  const status = document.getElementById(document.currentScript.dataset.status);
  const said = new Map();
  const say = (button, text) => {
    if (!status || window.seckillLive) return;
    said.set(button, text);
    const name = (b) => (said.size > 1 ? `${b.closest('article')?.getAttribute('aria-label')}: ` : '');
    status.textContent = [...said].map(([b, t]) => name(b) + t).join('\n');
  };
  // What an answer tells the shopper. A lost or busy answer is asked again by the page
  // once it has loaded (`early.rs`); until then the button stays pressed.
  const LATER = 'the page asks again once it has loaded (or reload it).';
  const told = (answer) => {
    try {
      const body = JSON.parse(answer.body);
      if (answer.ok) return `Got it: order ${body.order_id} (queued).`;
      return body.code === 'unavailable' ? `Busy: ${LATER}` : body.message || `Refused: ${LATER}`;
    } catch {
      return `No answer yet: ${LATER}`;
    }
  };
  // From the page's first byte, and its render's age when sent (`early.rs`).
  const nav = performance.getEntriesByType?.('navigation')?.[0];
  const since = nav?.responseStart > 0 ? nav.responseStart : performance.now();
  const age = nav?.serverTiming?.find((t) => t.name === 'age')?.duration ?? 0;
  const gateThen = gate + age;
  window.seckillSince = since;
  window.seckillGate = gateThen;
  const now = () => gateThen + performance.now() - since;
  // Each early press's answer, by voucher id, for the island: `{ ok, body }`, or null
  // when it could not be had (the island presses again).
  const early = (window.seckillEarly = {});
  const call = async (name, args) => {
    const r = await fetch('/api/' + name, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(args),
      signal: AbortSignal.timeout(10000),
    });
    return { ok: r.ok, body: await r.text() };
  };
  const grab = async (id, fair) => {
    let token = null;
    if (fair) {
      const issued = await call('grab_token', { voucher_id: id });
      if (!issued.ok) return issued;
      token = JSON.parse(issued.body).token;
    }
    return call('grab', { voucher_id: id, token });
  };
  document.addEventListener('click', (e) => {
    const button = e.target instanceof Element && e.target.closest('button[data-grab]');
    if (!button || window.seckillLive || button.disabled) return;
    const id = button.dataset.grab;
    button.disabled = true;
    say(button, 'Grabbing…');
    early[id] = grab(Number(id), 'fair' in button.dataset).catch(() => null);
    early[id].then((answer) => say(button, told(answer ?? { ok: false, body: '' })));
  });
  // A sale that opens before the island arrives opens its button then.
  const opening = setInterval(() => {
    if (window.seckillLive || !Number.isFinite(gate)) return clearInterval(opening);
    for (const button of document.querySelectorAll('button[data-opens][disabled]')) {
      if (Number(button.dataset.opens) <= now() && !early[button.dataset.grab]) button.disabled = false;
    }
  }, 100);
})();
