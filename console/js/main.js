// The console's shell: sign-in state, the live feed, and which page the hash names.
import { onUnauthorized } from './api.js';
import { errorBox, fill, h } from './dom.js';
import { startLive } from './live.js';
import { coalesce } from './refresh.js';
import { matchRoute, parseHash } from './router.js';
import { ROUTES } from './routes.js';
import { currentKey, forgetKey } from './session.js';
import { signInPage } from './pages/sign-in.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const sessionBar = document.getElementById('session');
const liveState = document.getElementById('live-state');

let live = null;
let page = { token: 0, cleanups: [] };
let firstRender = true;

const LIVE_WORDS = { connecting: 'connecting…', live: 'on', retrying: 'reconnecting…', off: 'off' };

function ensureLive(key) {
  if (live) return;
  live = startLive(key, {
    onState: (state) => {
      liveState.dataset.state = state;
      liveState.textContent = `Live: ${LIVE_WORDS[state] ?? state}`;
    },
    on401: signOut,
  });
}

function signOut() {
  live?.stop();
  live = null;
  forgetKey();
  render();
}

document.getElementById('sign-out').addEventListener('click', signOut);
onUnauthorized(() => {
  if (currentKey()) signOut();
});

function endPage() {
  for (const fn of page.cleanups.splice(0)) {
    try {
      fn();
    } catch (err) {
      console.error(err);
    }
  }
}

/** Everything a page gets: where to draw, its route params, the live feed, and whether it is still shown. */
function pageContext(token, box, params, query) {
  const ctx = {
    main: box,
    params,
    query,
    alive: () => page.token === token,
    onCleanup: (fn) => page.cleanups.push(fn),
    /**
     * Calls `reload` (coalesced) for each live message `match(message)` accepts, while
     * this page is shown.
     */
    live(match, reload, delayMs = 250) {
      if (!live) return;
      const poke = coalesce(async () => {
        if (ctx.alive()) await reload();
      }, delayMs);
      const off = live.subscribe((message) => {
        if (match(message)) poke();
      });
      ctx.onCleanup(() => {
        off();
        poke.cancel();
      });
    },
    setTitle: (title) => {
      document.title = `${title} · jetcron`;
    },
  };
  return ctx;
}

async function render() {
  endPage();
  const token = ++page.token;
  const key = currentKey();
  nav.hidden = !key;
  sessionBar.hidden = !key;
  if (!key) {
    document.title = 'Sign in · jetcron';
    firstRender = false;
    signInPage(main, () => {
      ensureLive(currentKey());
      render();
    });
    return;
  }
  ensureLive(key);
  const { path, query } = parseHash(location.hash);
  const found = matchRoute(ROUTES, path);
  for (const a of nav.querySelectorAll('a')) {
    if (found && a.dataset.section === found.route.section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  // Each page draws into its own box: a page still loading when the user moves on
  // writes into a box that is no longer shown.
  const box = h('div', { class: 'page' }, h('p', { class: 'loading', role: 'status' }, 'Loading…'));
  fill(main, box);
  const ctx = pageContext(token, box, found?.params ?? {}, query);
  if (!found) {
    ctx.setTitle('Not found');
    fill(box, h('h1', {}, 'Not found'), h('p', {}, 'No page here. ', h('a', { href: '#/' }, 'Go to the overview.')));
    return;
  }
  try {
    await found.route.render(ctx);
  } catch (err) {
    if (!ctx.alive()) return;
    ctx.setTitle('Error');
    fill(box, h('h1', {}, err?.status === 404 ? 'Not found' : 'Something went wrong'), errorBox(err));
  }
  // Moving focus to the new page tells keyboard and screen reader users it changed.
  if (ctx.alive() && !firstRender) {
    main.focus({ preventScroll: true });
    window.scrollTo(0, 0);
  }
  firstRender = false;
}

window.addEventListener('hashchange', render);
render();
