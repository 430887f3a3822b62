// Server-sent events framing, read from a fetch stream: EventSource cannot send the
// Authorization header, so the console reads `text/event-stream` itself.

/**
 * A parser fed with text chunks as they arrive (a chunk may end mid-line or mid-event).
 * `onEvent({ event, data, id })` runs for each complete event; comment lines (`: keep-alive`)
 * and events without data are skipped, as EventSource skips them.
 */
export function createSseParser(onEvent) {
  let buffer = '';
  let event = '';
  let data = [];
  let id = '';
  const dispatch = () => {
    if (data.length > 0) onEvent({ event: event || 'message', data: data.join('\n'), id });
    event = '';
    data = [];
  };
  const line = (text) => {
    if (text === '') return dispatch();
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id') id = value;
  };
  return {
    push(chunk) {
      buffer += chunk;
      // Lines end in \n, \r\n or \r; a trailing \r may be half of a \r\n still to come.
      for (;;) {
        const m = /\r\n|\n|\r(?!$)/.exec(buffer);
        if (!m) break;
        line(buffer.slice(0, m.index));
        buffer = buffer.slice(m.index + m[0].length);
      }
    },
  };
}
