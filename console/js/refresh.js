// Live messages arrive in bursts (a task's create, its attempt, its outcome within
// milliseconds): one reload of the page's data per burst, never two at once.

/** Returns `poke()`: a call to `reload` runs `delayMs` after the first poke, and again after it if poked meanwhile. */
export function coalesce(reload, delayMs = 250) {
  let timer = null;
  let running = false;
  let again = false;
  const run = async () => {
    timer = null;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      await reload();
    } catch (err) {
      console.error('live reload failed', err);
    } finally {
      running = false;
      if (again) {
        again = false;
        poke();
      }
    }
  };
  const poke = () => {
    if (timer === null) timer = setTimeout(run, delayMs);
  };
  poke.cancel = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    again = false;
  };
  return poke;
}
