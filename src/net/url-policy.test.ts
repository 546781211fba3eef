import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  checkOutboundUrl,
  classifyHost,
  customEmbeddingsUrl,
  guardedFetch,
  OutboundPolicy,
  OutboundUrlError,
  outboundPolicyFromEnv,
  type Resolver,
} from './url-policy';

const strict = { allowPrivate: false };
const relaxed = { allowPrivate: true };

function codeOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    if (!(err instanceof OutboundUrlError)) throw err;
    return err.code;
  }
}

async function asyncCodeOf(p: Promise<unknown>): Promise<string | null> {
  try {
    await p;
    return null;
  } catch (err) {
    if (!(err instanceof OutboundUrlError)) throw err;
    return err.code;
  }
}

describe('checkOutboundUrl (static rules)', () => {
  it.each([
    ['http://169.254.169.254/latest/meta-data', 'metadata_blocked'],
    ['http://metadata.google.internal/computeMetadata/v1', 'metadata_blocked'],
    ['http://metadata.goog/', 'metadata_blocked'],
    ['http://100.100.100.200/', 'metadata_blocked'],
    ['http://[fd00:ec2::254]/', 'metadata_blocked'],
    ['http://[::ffff:169.254.169.254]/', 'metadata_blocked'],
    ['http://127.0.0.1:8080/', 'private_blocked'],
    ['http://0x7f.1/', 'private_blocked'],
    ['http://2130706433/', 'private_blocked'],
    ['http://0177.0.0.1/', 'private_blocked'],
    ['http://[::ffff:127.0.0.1]/', 'private_blocked'],
    ['http://[::ffff:7f00:1]/', 'private_blocked'],
    ['http://localhost/', 'private_blocked'],
    ['http://localhost./', 'private_blocked'],
    ['http://api.localhost/', 'private_blocked'],
    ['http://[::1]/', 'private_blocked'],
    ['http://10.1.2.3/', 'private_blocked'],
    ['http://172.16.0.1/', 'private_blocked'],
    ['http://192.168.1.1/', 'private_blocked'],
    ['http://100.64.0.1/', 'private_blocked'],
    ['http://0.0.0.0/', 'private_blocked'],
    ['http://[fd00::1]/', 'private_blocked'],
    ['http://[fe80::1]/', 'private_blocked'],
    ['ftp://example.com/', 'scheme_not_allowed'],
    ['file:///etc/passwd', 'scheme_not_allowed'],
    ['http://user:pass@example.com/', 'credentials_not_allowed'],
    ['not a url', 'invalid_url'],
  ])('refuses %s with %s', (url, code) => {
    expect(codeOf(() => checkOutboundUrl(url, strict))).toBe(code);
  });

  it('keeps metadata blocked when private targets are allowed', () => {
    for (const url of ['http://169.254.169.254/', 'http://metadata.google.internal./', 'http://[fd00:ec2::254]/', 'http://169.254.1.1/']) {
      expect(codeOf(() => checkOutboundUrl(url, relaxed))).toBe('metadata_blocked');
    }
    for (const url of ['http://127.0.0.1/', 'http://0x7f.1/', 'http://[::1]/', 'http://10.1.2.3/', 'http://localhost./']) {
      expect(codeOf(() => checkOutboundUrl(url, relaxed))).toBeNull();
    }
  });

  it('passes public literals and names (statically; nothing is contacted)', () => {
    expect(checkOutboundUrl('http://8.8.8.8/', strict).hostname).toBe('8.8.8.8');
    expect(checkOutboundUrl('https://api.openai.com/v1', strict).hostname).toBe('api.openai.com');
    expect(checkOutboundUrl('http://[2606:4700:4700::1111]/', strict).hostname).toBe('[2606:4700:4700::1111]');
    expect(classifyHost('[::ffff:8.8.8.8]')).toBe('public');
  });

  it('never echoes the URL or host in its message', () => {
    const urls = [
      'http://10.9.8.7:9999/path',
      'http://user:hunter2@secret-host.example/',
      'gopher://secret-host.example/',
      'http://metadata.google.internal/secret-path',
      'http://secret-host.localhost/',
    ];
    for (const url of urls) {
      let message = '';
      try {
        checkOutboundUrl(url, strict);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).not.toBe('');
      expect(message).not.toMatch(/secret|hunter2|10\.9\.8\.7|9999|metadata\.google/);
    }
  });

  it('follows env: OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS', () => {
    expect(outboundPolicyFromEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: true }).allowPrivate).toBe(true);
    expect(outboundPolicyFromEnv({ OMNIROUTE_ALLOW_PRIVATE_PROVIDER_URLS: false }).allowPrivate).toBe(false);
  });
});

describe('customEmbeddingsUrl', () => {
  it('appends /embeddings once and strips trailing slashes', () => {
    expect(customEmbeddingsUrl('https://emb.example.com/v1', strict)).toBe('https://emb.example.com/v1/embeddings');
    expect(customEmbeddingsUrl('https://emb.example.com/v1///', strict)).toBe('https://emb.example.com/v1/embeddings');
    expect(customEmbeddingsUrl('https://emb.example.com/v1/embeddings/', strict)).toBe('https://emb.example.com/v1/embeddings');
    expect(customEmbeddingsUrl('https://emb.example.com', strict)).toBe('https://emb.example.com/embeddings');
  });

  it('refuses query strings and fragments, even empty ones', () => {
    for (const url of ['https://emb.example.com/v1?key=1', 'https://emb.example.com/v1#x', 'https://emb.example.com/v1?']) {
      expect(codeOf(() => customEmbeddingsUrl(url, strict))).toBe('query_not_allowed');
    }
  });

  it('applies the host rules', () => {
    expect(codeOf(() => customEmbeddingsUrl('http://127.0.0.1:11434/v1', strict))).toBe('private_blocked');
    expect(customEmbeddingsUrl('http://127.0.0.1:11434/v1', relaxed)).toBe('http://127.0.0.1:11434/v1/embeddings');
    expect(codeOf(() => customEmbeddingsUrl('http://169.254.169.254/v1', relaxed))).toBe('metadata_blocked');
  });
});

describe('guardedFetch (connect-time and redirect checks)', () => {
  type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;
  const servers: http.Server[] = [];
  const policies: OutboundPolicy[] = [];

  async function serve(handler: Handler): Promise<number> {
    const s = http.createServer(handler);
    servers.push(s);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    return (s.address() as AddressInfo).port;
  }

  function policy(allowPrivate: boolean, resolver?: Resolver): OutboundPolicy {
    const p = new OutboundPolicy({ allowPrivate, resolver });
    policies.push(p);
    return p;
  }

  afterAll(async () => {
    await Promise.all(policies.map((p) => p.close()));
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  it('blocks a hostname that resolves to a private address when it connects', async () => {
    const looked: string[] = [];
    const resolver: Resolver = async (h) => {
      looked.push(h);
      return [{ address: '10.0.0.7', family: 4 }];
    };
    const p = policy(false, resolver);
    // The name itself looks public, so only the resolved address can refuse it.
    expect(checkOutboundUrl('http://innocent.example/', p).hostname).toBe('innocent.example');
    await expect(asyncCodeOf(guardedFetch('http://innocent.example/', {}, p))).resolves.toBe('private_blocked');
    expect(looked).toEqual(['innocent.example']);
  });

  it('refuses when any one resolved address is blocked (DNS answers mixing public and loopback)', async () => {
    const p = policy(false, async () => [
      { address: '8.8.8.8', family: 4 },
      { address: '127.0.0.1', family: 4 },
    ]);
    await expect(asyncCodeOf(guardedFetch('http://mixed.example/', {}, p))).resolves.toBe('private_blocked');
  });

  it('connects through the fixed-answer resolver when the address is allowed', async () => {
    const port = await serve((_req, res) => res.end('hello'));
    const p = policy(true, async () => [{ address: '127.0.0.1', family: 4 }]);
    const res = await guardedFetch(`http://service.example:${port}/`, {}, p);
    expect(await res.text()).toBe('hello');
  });

  it('refuses a redirect to a metadata address even when private targets are allowed', async () => {
    let hits = 0;
    const port = await serve((_req, res) => {
      hits++;
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    });
    const p = policy(true);
    await expect(asyncCodeOf(guardedFetch(`http://127.0.0.1:${port}/start`, {}, p))).resolves.toBe('metadata_blocked');
    expect(hits).toBe(1);
  });

  it('re-checks the resolved address of every redirect hop', async () => {
    const looked: string[] = [];
    const resolver: Resolver = async (h) => {
      looked.push(h);
      // rebind.example passes every name check and only turns out to be the metadata server on resolution.
      return h === 'rebind.example' ? [{ address: '169.254.169.254', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
    };
    let finalHits = 0;
    const finalPort = await serve((_req, res) => {
      finalHits++;
      res.end('reached');
    });
    const firstPort = await serve((req, res) => {
      const target = req.url === '/to-good' ? `http://good.example:${finalPort}/` : `http://rebind.example:${finalPort}/`;
      res.writeHead(307, { location: target }).end();
    });
    const p = policy(true, resolver);

    const ok = await guardedFetch(`http://first.example:${firstPort}/to-good`, {}, p);
    expect(await ok.text()).toBe('reached');
    expect(looked).toEqual(['first.example', 'good.example']);

    await expect(asyncCodeOf(guardedFetch(`http://first.example:${firstPort}/to-rebind`, {}, p))).resolves.toBe('metadata_blocked');
    expect(looked).toContain('rebind.example');
    expect(finalHits).toBe(1);
  });

  it('stops after 5 redirects', async () => {
    let hits = 0;
    const port = await serve((_req, res) => {
      hits++;
      res.writeHead(302, { location: `/loop${hits}` }).end();
    });
    await expect(asyncCodeOf(guardedFetch(`http://127.0.0.1:${port}/`, {}, policy(true)))).resolves.toBe('too_many_redirects');
    expect(hits).toBe(6);
  });

  it('drops Authorization on a cross-origin redirect and turns a 303 POST into a GET', async () => {
    const seen: Array<{ method?: string; auth?: string }> = [];
    const targetPort = await serve((req, res) => {
      seen.push({ method: req.method, auth: req.headers.authorization });
      res.end('ok');
    });
    const port = await serve((req, res) => {
      seen.push({ method: req.method, auth: req.headers.authorization });
      res.writeHead(303, { location: `http://127.0.0.1:${targetPort}/done` }).end();
    });
    const res = await guardedFetch(
      `http://127.0.0.1:${port}/`,
      { method: 'POST', headers: { authorization: 'Bearer sk-test', 'content-type': 'application/json' }, body: '{}' },
      policy(true),
    );
    expect(await res.text()).toBe('ok');
    expect(seen).toEqual([
      { method: 'POST', auth: 'Bearer sk-test' },
      { method: 'GET', auth: undefined },
    ]);
  });

  it('refuses a loopback literal at connect time without a resolver call', async () => {
    const looked: string[] = [];
    const p = policy(false, async (h) => {
      looked.push(h);
      return [{ address: '127.0.0.1', family: 4 }];
    });
    // Straight through the Agent, bypassing guardedFetch's static check: the connector still refuses.
    const res = p.dispatcher.request({ origin: 'http://127.0.0.1:9', path: '/', method: 'GET' });
    await expect(res).rejects.toMatchObject({ code: 'private_blocked' });
    expect(looked).toEqual([]);
    await p.close();
  });
});
