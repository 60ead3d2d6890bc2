//! How the in-test target answers: `server/discover`, `tools/list` and the reference tools'
//! `tools/call` rounds, with every retry leg checked against what the target minted; JSON or
//! SSE bodies, naming the instance that "served" the request.

use super::*;

fn json_response(
    status: StatusCode,
    body: Vec<u8>,
    instance: &str,
    opts: &TargetOptions,
    sse: bool,
) -> Response<Full<Bytes>> {
    let (ct, body) = if sse {
        let mut b = b": stream\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\nevent: message\ndata: ".to_vec();
        b.extend_from_slice(&body);
        b.extend_from_slice(b"\n\n");
        ("text/event-stream", b)
    } else {
        ("application/json", body)
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static(ct));
    if opts.header {
        r.headers_mut().insert(
            header::DEFAULT_UPSTREAM_HEADER,
            HeaderValue::from_str(instance).unwrap(),
        );
    }
    r
}

fn error(id: &Value, code: i32, message: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
    .unwrap()
}

fn result(id: &Value, mut result: Value, instance: &str, opts: &TargetOptions) -> Vec<u8> {
    if opts.meta {
        result["_meta"] = json!({ meta::EDGE_INSTANCE: instance });
    }
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap()
}

pub(super) async fn handle(
    s: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let n = s.seq.fetch_add(1, SeqCst) + 1;
    if req.version() == http::Version::HTTP_2 {
        s.stats.h2_requests.fetch_add(1, SeqCst);
    }
    let idx = (s.rr.fetch_add(1, SeqCst) % s.opts.instances.len() as u64) as usize;
    let instance = s.opts.instances[idx].clone();
    // A global pause: once, from request N on, every request waits until it is over.
    if let Some((at, pause)) = s.opts.stall_once {
        if n == at && !s.stalled.swap(true, SeqCst) {
            *s.stall_until.lock().unwrap() = Some(tokio::time::Instant::now() + pause);
        }
        let until = *s.stall_until.lock().unwrap();
        if let Some(u) = until {
            tokio::time::sleep_until(u).await;
        }
    }
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    // The load tester's preflight (ids "preflight-N") is counted apart from the load.
    if String::from_utf8_lossy(&body).contains(r#""id":"preflight-"#) {
        s.stats.preflight.fetch_add(1, SeqCst);
    } else {
        s.stats.requests.fetch_add(1, SeqCst);
    }
    let env = match mcp::envelope::parse(&body) {
        Ok(e) => e,
        Err(e) => {
            let rej = e.rejection();
            return Ok(json_response(
                StatusCode::from_u16(rej.status).unwrap(),
                rej.body(e.id()),
                &instance,
                &s.opts,
                false,
            ));
        }
    };
    let claims = mcp::Claims::read(&parts.headers);
    if let Err(rej) = mcp::check_request(
        &claims,
        &env,
        mcp::VersionPolicy::Exactly(&[mcp::PROTOCOL_VERSION]),
    ) {
        s.stats.header_rejections.fetch_add(1, SeqCst);
        return Ok(json_response(
            StatusCode::from_u16(rej.status).unwrap(),
            rej.body(env.id.as_deref()),
            &instance,
            &s.opts,
            false,
        ));
    }
    let v: Value = serde_json::from_slice(&body).unwrap();
    let id = v["id"].clone();
    let Some(principal) = header::bearer_token(&parts.headers).map(str::to_owned) else {
        return Ok(json_response(
            StatusCode::UNAUTHORIZED,
            error(&id, codes::INVALID_REQUEST, "no bearer"),
            &instance,
            &s.opts,
            false,
        ));
    };
    let ok = |body| {
        Ok(json_response(
            StatusCode::OK,
            body,
            &instance,
            &s.opts,
            false,
        ))
    };
    let method = env.method.as_deref().unwrap_or_default();
    match method {
        methods::DISCOVER => {
            return ok(result(
                &id,
                json!({"resultType": result_type::COMPLETE, "supportedVersions": [mcp::PROTOCOL_VERSION],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"}),
                &instance,
                &s.opts,
            ))
        }
        methods::TOOLS_LIST => {
            return ok(result(
                &id,
                json!({"resultType": result_type::COMPLETE, "tools": TOOLS.iter().filter_map(|t| tools::tool(t)).map(|t| json!({"name": t.name, "inputSchema": serde_json::from_str::<Value>(t.schema).unwrap()})).collect::<Vec<_>>(), "ttlMs": 0, "cacheScope": "public"}),
                &instance,
                &s.opts,
            ))
        }
        methods::TOOLS_CALL => {}
        _ => {
            return Ok(json_response(
                StatusCode::NOT_FOUND,
                error(&id, codes::METHOD_NOT_FOUND, "no such method"),
                &instance,
                &s.opts,
                false,
            ))
        }
    }
    let p = &v["params"];
    let tool = p["name"].as_str().unwrap_or_default().to_string();
    let args = p["arguments"].clone();
    let Some(t) = tools::tool(&tool).filter(|t| TOOLS.contains(&t.name)) else {
        return ok(error(&id, codes::INVALID_PARAMS, "unknown tool"));
    };
    // Mcp-Param-* headers the tool declares must mirror their arguments.
    for (arg, suffix) in t.param_headers {
        let want = args[*arg].as_str();
        let got = parts
            .headers
            .get(format!(
                "{}{}",
                header::PARAM_PREFIX,
                suffix.to_ascii_lowercase()
            ))
            .and_then(|h| h.to_str().ok());
        if want.is_some() && got != want {
            let body = error(
                &id,
                codes::HEADER_MISMATCH,
                &format!("Mcp-Param-{suffix} missing or wrong"),
            );
            return Ok(json_response(
                StatusCode::BAD_REQUEST,
                body,
                &instance,
                &s.opts,
                false,
            ));
        }
    }
    let map = if s.opts.stateful { idx } else { 0 };
    let mut state = None;
    if let Some(st) = p.get("requestState") {
        let issued = st
            .as_str()
            .and_then(|k| s.states[map].lock().unwrap().remove(k));
        let valid = issued.as_ref().is_some_and(|i| {
            i.tool == tool && i.arguments == args && i.id != id && i.principal == principal
        });
        if !valid {
            s.stats.retries_refused.fetch_add(1, SeqCst);
            return ok(error(
                &id,
                codes::INVALID_PARAMS,
                "Invalid or expired requestState",
            ));
        }
        s.stats.retries_accepted.fetch_add(1, SeqCst);
        state = issued.map(|i| i.payload);
    }
    // The tool itself is the reference backend's: the target only plays the fleet around it.
    let no_map = serde_json::Map::new();
    let caps = p["_meta"][meta::CLIENT_CAPABILITIES]
        .as_object()
        .unwrap_or(&no_map);
    let answers = match (&state, p["inputResponses"].as_object()) {
        (Some(_), Some(a)) => a.clone(),
        _ => serde_json::Map::new(),
    };
    let call = tools::Call {
        name: t.name,
        args: args.as_object().unwrap_or(&no_map),
        caps,
        answers: &answers,
        state: state.as_ref(),
    };
    let outcome = match (t.run)(&call).unwrap_or_else(|e| e) {
        // charge and charge_count: the backend's own ledger, in this process's memory.
        tools::Outcome::Ledger(op) => match tools::settle(op, &s.ledger).await {
            Ok((r, _)) => tools::Outcome::Complete(r),
            Err(e) => tools::Outcome::Error(codes::INTERNAL_ERROR, e),
        },
        other => other,
    };
    let res = match outcome {
        tools::Outcome::Complete(mut r) => {
            s.stats.completed.fetch_add(1, SeqCst);
            r["resultType"] = json!(result_type::COMPLETE);
            r
        }
        tools::Outcome::Ask { requests, data } => {
            let k = format!("st-{}-{}/+\"=", s.state_seq.fetch_add(1, SeqCst), instance);
            let payload = StatePayload {
                principal: principal.clone(),
                expires_at_ms: u64::MAX,
                method: methods::TOOLS_CALL.into(),
                digest: String::new(),
                round: call.round() + 1,
                nonce: k.clone(),
                data,
                issuer: instance.clone(),
            };
            let issued = Issued {
                tool: tool.clone(),
                arguments: args.clone(),
                id: id.clone(),
                principal,
                payload,
            };
            s.states[map].lock().unwrap().insert(k.clone(), issued);
            json!({"resultType": result_type::INPUT_REQUIRED, "inputRequests": requests, "requestState": k})
        }
        tools::Outcome::Error(code, msg) => return ok(error(&id, code, &msg)),
        other => {
            return ok(error(
                &id,
                codes::INTERNAL_ERROR,
                &format!("the target does not serve {other:?}"),
            ))
        }
    };
    Ok(json_response(
        StatusCode::OK,
        result(&id, res, &instance, &s.opts),
        &instance,
        &s.opts,
        s.opts.sse,
    ))
}
