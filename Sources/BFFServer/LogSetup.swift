import Foundation
import Logging
import BFF

/// Bootstraps swift-log once for the process: JSON lines on standard error.
enum LogSetup {
    static func bootstrap(level: String) -> Logger {
        let logLevel = Logger.Level(rawValue: level == "warning" ? "warning" : level) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = JSONLogHandler(label: label)
            handler.logLevel = logLevel
            return handler
        }
        var logger = Logger(label: "smart-bff")
        logger.logLevel = logLevel
        return logger
    }
}
