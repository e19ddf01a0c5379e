/// The clients compared; `rawValue` is the name used on the command line and in the JSON.
enum BenchClientKind: String, CaseIterable, Sendable {
    case libcurl
    /// Raw libcurl as a library that runs no user code on its driver thread must use it, and
    /// nothing more: each pass's finished transfers handed to a second thread, which asks for
    /// the next requests (`lcb_config.handoff`). The floor of Curlew's design on this machine
    /// (request workloads only).
    case libcurlHandoff = "libcurl-handoff"
    /// The same with the hand-off through a libdispatch serial queue (`dispatch_async_f`), the
    /// way Curlew reaches its completion queue (request workloads only).
    case libcurlDispatch = "libcurl-dispatch"
    case curlew
    /// Curlew with one `EventMonitor` attached (every event delivered on the monitor's queue):
    /// what the event seam costs a user who logs or measures.
    case curlewMonitor = "curlew-monitor"
    /// Curlew with `postsTaskNotifications = false`: what AFNetworking's task notifications,
    /// on by default, cost a user who does not observe them (on request only).
    case curlewQuiet = "curlew-quiet"
    /// Curlew's async API, as AsyncHTTPClient's client is driven: `concurrency` Swift tasks,
    /// each looping `try await manager.dataResponse(for:)` (request workloads only).
    case curlewAsync = "curlew-async"
    case urlsession
    case ahc

    /// Runs `spec` with this client; throws `Unsupported` for a workload it cannot do.
    func run(_ spec: WorkloadSpec) async throws -> Outcome {
        switch self {
        case .libcurl: return try LibcurlClient().run(spec)
        case .libcurlHandoff: return try LibcurlClient(handoff: .thread).run(spec)
        case .libcurlDispatch: return try LibcurlClient(handoff: .dispatchQueue).run(spec)
        case .curlew: return try await CurlewClient().run(spec)
        case .curlewMonitor: return try await CurlewClient(monitored: true).run(spec)
        case .curlewQuiet: return try await CurlewClient(postsNotifications: false).run(spec)
        case .curlewAsync: return try await CurlewClient(async: true).run(spec)
        case .urlsession: return try await URLSessionClient().run(spec)
        case .ahc: return try await AHCClient().run(spec)
        }
    }
}
