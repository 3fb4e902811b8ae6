// The user-level crash test's child: saves ContainerCrashWorkload's saves
// through a PersistentContainer until it is killed, printing "ack <save>" for
// each save whose call returned (durable: the store syncs with `.grouped`).
//
// Odd saves are MagicalRecord block saves (a private child of the writer);
// even saves take the recommended stack's path: a background child of the view
// context saves into it, then the container saves view → writer → disk. The
// main queue runs on the main thread (dispatchMain), as in an app.
//
// usage: strata-container-crash-child <store directory>
//        strata-container-crash-child migrate <store directory>
//        strata-container-crash-child migrate-custom <store directory>
//
// With `migrate`, it opens the store with the model's next version (a
// migration), prints "ack 1" once it is open, and waits to be killed;
// `migrate-custom` takes the same step through a custom stage.
import ContainerCrashWorkload
import Dispatch
import Foundation
import Strata

typealias Workload = ContainerCrashWorkload

/// Writes a line straight to fd 1, unbuffered: the parent must see every
/// acknowledgement the moment it is made, before any SIGKILL.
func report(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

if CommandLine.arguments.count == 3 && CommandLine.arguments[1].hasPrefix("migrate") {
    do {
        let plan = CommandLine.arguments[1] == "migrate-custom" ? try Workload.makeCustomPlan() : nil
        let container = try PersistentContainer(
            name: "CrashMigration", model: Workload.makeMigratedModel(), directory: CommandLine.arguments[2], options: Workload.options(),
            migrationPlan: plan)
        report("ack 1")
        _ = container
        while true { sleep(60) }
    } catch {
        report("error \(error)")
        exit(1)
    }
}
guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: strata-container-crash-child [migrate] <store directory>\n".utf8))
    exit(2)
}
let directory = CommandLine.arguments[1]

Thread {
    do {
        let container = try PersistentContainer(
            name: "CrashTest", model: Workload.makeModel(), directory: directory, options: Workload.options())
        var save = try container.writerContext.performAndWait { () throws -> Int in
            Int(try Workload.Checkpoint.first(in: container.writerContext)?.lastSave ?? 0)
        }
        while true {
            save += 1
            let s = save
            if s % 2 == 1 {
                try container.saveAndWait { context in try Workload.applySave(s, in: context) }
                // Let the view context merge that save before the next one
                // reads through it (automatic merges arrive on the main queue).
                DispatchQueue.main.sync {}
            } else {
                let background = container.newBackgroundContext()
                try background.performAndWait { () throws in
                    try Workload.applySave(s, in: background)
                    try background.save()
                }
                try container.saveAndWait()
            }
            report("ack \(s)")
        }
    } catch {
        report("error \(error)")
        exit(1)
    }
}.start()

dispatchMain()
