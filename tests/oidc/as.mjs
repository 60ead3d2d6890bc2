// The authorization server of tests/gateway/credentials/oauth.rs: node-oidc-provider (an
// OpenID-certified OAuth 2.0 server) on loopback, issuing JWT access tokens signed with a key
// published at /jwks, with the client credentials grant (resource indicators, RFC 8707),
// introspection, and an RFC 8693 token-exchange grant registered with `registerGrantType`:
// it verifies the subject token (one this server issued for the edge's resource) and issues a
// token for the requested audience carrying the caller's `sub` (and `act`: the exchanging
// client).
//
// Settings (environment): PORT, KEY_FILE (the signing key, made on first start and reused so a
// restart keeps the same JWKS), EDGE_RESOURCE (the gateway's resource), RESOURCES (JSON:
// resource URI -> { scope, ttl }), CLIENTS (JSON: oidc-provider client metadata).
// GET /test/counts answers how many tokens each grant issued, per client.
// Prints "ready <port>" on stdout when listening.

import * as fs from 'node:fs';
import * as crypto from 'node:crypto';
import Provider, { errors } from 'oidc-provider';
import { exportJWK, generateKeyPair, importJWK, jwtVerify, createLocalJWKSet, SignJWT } from 'jose';

const PORT = Number(process.env.PORT);
const ISSUER = `http://127.0.0.1:${PORT}`;
const EDGE_RESOURCE = process.env.EDGE_RESOURCE;
const RESOURCES = JSON.parse(process.env.RESOURCES);
const CLIENTS = JSON.parse(process.env.CLIENTS);
const TE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const AT = 'urn:ietf:params:oauth:token-type:access_token';

async function signingKey(file) {
  if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8'));
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: 'as-1', alg: 'RS256', use: 'sig' };
  fs.writeFileSync(file, JSON.stringify(jwk), { mode: 0o600 });
  return jwk;
}

const privateJwk = await signingKey(process.env.KEY_FILE);
const { d, p, q, dp, dq, qi, ...publicJwk } = privateJwk;
const localKeys = createLocalJWKSet({ keys: [publicJwk] });
const signWith = await importJWK(privateJwk, 'RS256');

const counts = { client_credentials: {}, [TE]: {}, refused: 0 };
const count = (grant, client) => {
  counts[grant][client] = (counts[grant][client] || 0) + 1;
};

const scopes = new Set(['mcp']);
for (const r of Object.values(RESOURCES)) r.scope.split(' ').forEach((s) => scopes.add(s));

const provider = new Provider(ISSUER, {
  clients: CLIENTS,
  jwks: { keys: [privateJwk] },
  scopes: [...scopes],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, resource) {
        const rs = RESOURCES[resource];
        if (!rs) throw new errors.InvalidTarget(`unknown resource ${resource}`);
        return {
          scope: rs.scope,
          audience: resource,
          accessTokenTTL: rs.ttl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
});

// RFC 8693 §2.1: the client is authenticated by the provider before the handler runs.
async function tokenExchange(ctx) {
  const { client, params } = ctx.oidc;
  if (params.subject_token_type !== AT) {
    throw new errors.InvalidRequest(`subject_token_type must be ${AT}`);
  }
  if (params.requested_token_type && params.requested_token_type !== AT) {
    throw new errors.InvalidRequest('only access tokens are issued');
  }
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(params.subject_token, localKeys, {
      issuer: ISSUER,
      audience: EDGE_RESOURCE,
    }));
  } catch (e) {
    throw new errors.InvalidGrant(`the subject token does not verify (${e.code})`);
  }
  const target = params.resource || params.audience;
  const rs = RESOURCES[target];
  if (!rs) throw new errors.InvalidTarget(`unknown resource ${target}`);
  // Never wider than what the caller had, nor than the resource serves.
  const had = new Set((subject.scope || '').split(' ').filter(Boolean));
  const serves = new Set(rs.scope.split(' '));
  const asked = params.scope ? params.scope.split(' ') : [...serves];
  const scope = asked.filter((s) => had.has(s) && serves.has(s)).join(' ');
  const now = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({ scope, client_id: client.clientId, act: { sub: client.clientId } })
    .setProtectedHeader({ alg: 'RS256', kid: privateJwk.kid, typ: 'at+jwt' })
    .setIssuer(ISSUER)
    .setSubject(subject.sub)
    .setAudience(target)
    .setIssuedAt(now)
    .setExpirationTime(now + rs.ttl)
    .setJti(crypto.randomUUID())
    .sign(signWith);
  ctx.body = { access_token: token, issued_token_type: AT, token_type: 'Bearer', expires_in: rs.ttl, scope };
}

provider.registerGrantType(
  TE,
  tokenExchange,
  ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope'],
  ['audience', 'resource'],
);

provider.use(async (ctx, next) => {
  if (ctx.path === '/test/counts') {
    ctx.body = counts;
    return;
  }
  await next();
  if (ctx.path === '/token' && ctx.method === 'POST') {
    const grant = ctx.oidc?.params?.grant_type;
    const client = ctx.oidc?.client?.clientId || '?';
    if (ctx.status === 200 && counts[grant]) count(grant, client);
    else counts.refused += 1;
  }
});

provider.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`ready ${PORT}\n`);
});
