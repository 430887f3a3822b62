import os from 'node:os';
import nodemailer from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';

export interface Mailer {
  send(msg: { to: string; subject: string; text: string }): Promise<void>;
  close(): void;
}

export interface SmtpSettings {
  options: SMTPTransport.Options;
  from: string;
  /** The URL without its password, for logs. */
  display: string;
}

const BOOLEAN_PARAMS = ['requireTLS', 'ignoreTLS'] as const;

/**
 * `SMTP_URL`: `smtp://[user:pass@]host[:port]` (STARTTLS when the server offers it) or
 * `smtps://…` (TLS from the start), with optional query parameters `from=` (the sender,
 * default `jetcron <jetcron@HOSTNAME>`), `requireTLS=true`, `ignoreTLS=true` and
 * `tls.rejectUnauthorized=false`.
 */
export function parseSmtpUrl(text: string): SmtpSettings {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error('SMTP_URL is not a URL');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') throw new Error(`SMTP_URL must start with smtp:// or smtps://, not ${url.protocol}//`);
  if (!url.hostname) throw new Error('SMTP_URL has no host');
  const options: SMTPTransport.Options = {
    host: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
    secure: url.protocol === 'smtps:',
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
  };
  if (url.port) options.port = Number(url.port);
  if (url.username) options.auth = { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) };
  for (const name of BOOLEAN_PARAMS) {
    const v = url.searchParams.get(name);
    if (v !== null) options[name] = v === 'true' || v === '1';
  }
  const reject = url.searchParams.get('tls.rejectUnauthorized');
  if (reject !== null) options.tls = { rejectUnauthorized: !(reject === 'false' || reject === '0') };
  const from = url.searchParams.get('from') || `jetcron <jetcron@${os.hostname()}>`;
  const shown = new URL(url.href);
  if (shown.password) shown.password = '***';
  shown.search = '';
  return { options, from, display: shown.href };
}

export function createMailer(settings: SmtpSettings): Mailer {
  const transport = nodemailer.createTransport(settings.options);
  return {
    async send(msg) {
      await transport.sendMail({ from: settings.from, to: msg.to, subject: msg.subject, text: msg.text });
    },
    close() {
      transport.close();
    },
  };
}
